/* gp_abi_layout.c — prints the plugin ABI's struct layouts as C lays them out (sizeof, and
 * offsetof of every field), one line each: "STRUCT size N" then "STRUCT FIELD OFFSET".
 * tests/python/test_abi_layout.py compares python/gradprec/_plugin.py's ctypes
 * Structures with it (issue 28: the ctypes structs mirror the header by hand). */
#include <stddef.h>
#include <stdio.h>

#include "kernels/gp_plugin_abi.h"

#define SIZE(T) printf("%s size %zu\n", #T, sizeof(T))
#define FIELD(T, F) printf("%s %s %zu\n", #T, #F, offsetof(T, F))

int main(void)
{
    SIZE(gp_plugin_accumulate_args);
    FIELD(gp_plugin_accumulate_args, struct_size); FIELD(gp_plugin_accumulate_args, grad_format);
    FIELD(gp_plugin_accumulate_args, acc_format); FIELD(gp_plugin_accumulate_args, rounding);
    FIELD(gp_plugin_accumulate_args, ftz); FIELD(gp_plugin_accumulate_args, seed);
    FIELD(gp_plugin_accumulate_args, stream); FIELD(gp_plugin_accumulate_args, first_index);
    FIELD(gp_plugin_accumulate_args, n); FIELD(gp_plugin_accumulate_args, microbatch);
    FIELD(gp_plugin_accumulate_args, grad); FIELD(gp_plugin_accumulate_args, acc);
    FIELD(gp_plugin_accumulate_args, comp);

    SIZE(gp_plugin_unscale_args);
    FIELD(gp_plugin_unscale_args, struct_size); FIELD(gp_plugin_unscale_args, acc_format);
    FIELD(gp_plugin_unscale_args, ftz); FIELD(gp_plugin_unscale_args, inv_scale);
    FIELD(gp_plugin_unscale_args, n); FIELD(gp_plugin_unscale_args, acc);
    FIELD(gp_plugin_unscale_args, found_inf);

    SIZE(gp_plugin_adamw_args);
    FIELD(gp_plugin_adamw_args, struct_size); FIELD(gp_plugin_adamw_args, param_format);
    FIELD(gp_plugin_adamw_args, state_format); FIELD(gp_plugin_adamw_args, grad_format);
    FIELD(gp_plugin_adamw_args, variant); FIELD(gp_plugin_adamw_args, rounding);
    FIELD(gp_plugin_adamw_args, lr); FIELD(gp_plugin_adamw_args, beta1); FIELD(gp_plugin_adamw_args, beta2);
    FIELD(gp_plugin_adamw_args, eps); FIELD(gp_plugin_adamw_args, weight_decay);
    FIELD(gp_plugin_adamw_args, step); FIELD(gp_plugin_adamw_args, inv_scale);
    FIELD(gp_plugin_adamw_args, found_inf); FIELD(gp_plugin_adamw_args, seed);
    FIELD(gp_plugin_adamw_args, stream); FIELD(gp_plugin_adamw_args, first_index);
    FIELD(gp_plugin_adamw_args, n); FIELD(gp_plugin_adamw_args, grad); FIELD(gp_plugin_adamw_args, param);
    FIELD(gp_plugin_adamw_args, master); FIELD(gp_plugin_adamw_args, comp);
    FIELD(gp_plugin_adamw_args, m); FIELD(gp_plugin_adamw_args, v); FIELD(gp_plugin_adamw_args, evaluation);
    FIELD(gp_plugin_adamw_args, state_quant); FIELD(gp_plugin_adamw_args, block);
    FIELD(gp_plugin_adamw_args, m_codes); FIELD(gp_plugin_adamw_args, v_codes);
    FIELD(gp_plugin_adamw_args, m_scales); FIELD(gp_plugin_adamw_args, v_scales);

    SIZE(gp_plugin_sumsq_args);
    FIELD(gp_plugin_sumsq_args, struct_size); FIELD(gp_plugin_sumsq_args, format);
    FIELD(gp_plugin_sumsq_args, n); FIELD(gp_plugin_sumsq_args, grad); FIELD(gp_plugin_sumsq_args, sumsq);

    SIZE(gp_plugin_scale_args);
    FIELD(gp_plugin_scale_args, struct_size); FIELD(gp_plugin_scale_args, format);
    FIELD(gp_plugin_scale_args, ftz); FIELD(gp_plugin_scale_args, coef); FIELD(gp_plugin_scale_args, n);
    FIELD(gp_plugin_scale_args, grad);

    SIZE(gp_plugin_scaler_args);
    FIELD(gp_plugin_scaler_args, struct_size); FIELD(gp_plugin_scaler_args, scale);
    FIELD(gp_plugin_scaler_args, tracker); FIELD(gp_plugin_scaler_args, found_inf);
    FIELD(gp_plugin_scaler_args, growth); FIELD(gp_plugin_scaler_args, backoff);
    FIELD(gp_plugin_scaler_args, interval);

    SIZE(gp_plugin);
    FIELD(gp_plugin, abi_version); FIELD(gp_plugin, name); FIELD(gp_plugin, memory);
    FIELD(gp_plugin, accumulate); FIELD(gp_plugin, unscale); FIELD(gp_plugin, adamw);
    FIELD(gp_plugin, grad_sumsq); FIELD(gp_plugin, grad_scale); FIELD(gp_plugin, scaler_update);
    FIELD(gp_plugin, accumulate_many);
    return 0;
}
