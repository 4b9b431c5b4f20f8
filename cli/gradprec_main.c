/* gradprec_main.c — the `gradprec` executable: everything lives in gradprec_core. */
#include <stdio.h>

#include "gp_cli.h"

int main(int argc, char **argv)
{
    return gp_cli_main(argc, argv, stdout, stderr);
}
