/* gp_vocab.h — one list per vocabulary (docs/extending.md): each name users write, in the
 * order of its enum value, beside the enum constant and, where the plugin ABI has one,
 * the ABI's constant. Everything else is made from these lists: the name tables and
 * parsers (gp_names.c), the C API's gradprec_vocab_name (which the Python package reads
 * instead of keeping its own tables), the fuzz decoders' choices; gp_names.c
 * _Static_asserts tie each enum and ABI value to its position, and a list's length to
 * the enum's count, so a value added to an enum without its line here does not build.
 * tests/test_vocab.c checks the docs' tables (formats.md, scenarios.md, commands.md) against them.
 *
 * Adding a value: append a line at the end of its list (positions are ABI values and fuzz
 * corpus bytes: never reorder), add the enum constant (and ABI constant) it names.
 *
 * Each X(...) line: X(ENUM, ABI_CONSTANT, "name") or, without an ABI value, X(ENUM, "name"). */
#ifndef GP_VOCAB_H
#define GP_VOCAB_H

/* Storage formats (gp_format, kernels/arith/gp_format.h; GP_PLUGIN_FP32 ...). */
#define GP_VOCAB_FORMATS(X)                                                                        \
    X(GP_FP32, GP_PLUGIN_FP32, "fp32")                                                             \
    X(GP_BF16, GP_PLUGIN_BF16, "bf16")                                                             \
    X(GP_FP16, GP_PLUGIN_FP16, "fp16")                                                             \
    X(GP_FP8_E4M3, GP_PLUGIN_FP8_E4M3, "fp8_e4m3")                                                 \
    X(GP_FP8_E5M2, GP_PLUGIN_FP8_E5M2, "fp8_e5m2")

/* Rounding modes of a conversion (gp_rmode, kernels/arith/gp_arith.h): `gradprec round
 * --mode`, the stores of the optimizer. */
#define GP_VOCAB_RMODES(X)                                                                         \
    X(GP_RNE, "rne")                                                                               \
    X(GP_RTZ, "rtz")                                                                               \
    X(GP_STOCHASTIC, "stochastic")

/* Accumulator policies (gp_acc_rounding, kernels/arith/gp_accum.h; GP_PLUGIN_RNE ...):
 * scenario key precision.rounding. */
#define GP_VOCAB_ACC_ROUNDINGS(X)                                                                  \
    X(GP_ACC_RNE, GP_PLUGIN_RNE, "rne")                                                            \
    X(GP_ACC_RTZ, GP_PLUGIN_RTZ, "rtz")                                                            \
    X(GP_ACC_STOCHASTIC, GP_PLUGIN_STOCHASTIC, "stochastic")                                       \
    X(GP_ACC_KAHAN, GP_PLUGIN_KAHAN, "kahan")

/* AdamW variants (gp_adamw_variant, kernels/arith/gp_adamw.h; GP_PLUGIN_ADAMW_*). */
#define GP_VOCAB_ADAMW_VARIANTS(X)                                                                 \
    X(GP_ADAMW_PLAIN, GP_PLUGIN_ADAMW_PLAIN, "plain")                                              \
    X(GP_ADAMW_ONE_STORE, GP_PLUGIN_ADAMW_ONE_STORE, "one_store")                                  \
    X(GP_ADAMW_MASTER, GP_PLUGIN_ADAMW_MASTER, "master")                                           \
    X(GP_ADAMW_KAHAN, GP_PLUGIN_ADAMW_KAHAN, "kahan")                                              \
    X(GP_ADAMW_TORCH_FUSED_CPU, GP_PLUGIN_ADAMW_TORCH_FUSED_CPU, "torch_fused_cpu")

/* AdamW evaluation orders (gp_adamw_eval, kernels/arith/gp_adamw.h; GP_PLUGIN_EVAL_*):
 * scenario key optimizer.evaluation. */
#define GP_VOCAB_ADAMW_EVALS(X)                                                                    \
    X(GP_ADAMW_TORCH_CUDA, GP_PLUGIN_EVAL_TORCH_CUDA, "torch_cuda")                                \
    X(GP_ADAMW_TORCH_CPU, GP_PLUGIN_EVAL_TORCH_CPU, "torch_cpu")                                   \
    X(GP_ADAMW_UNFUSED, GP_PLUGIN_EVAL_UNFUSED, "unfused")                                         \
    X(GP_ADAMW_TORCH_CPU_ZEN4, GP_PLUGIN_EVAL_TORCH_CPU_ZEN4, "torch_cpu_zen4")                    \
    X(GP_ADAMW_TORCH_CUDA_FOREACH, GP_PLUGIN_EVAL_TORCH_CUDA_FOREACH, "torch_cuda_foreach")        \
    X(GP_ADAMW_TORCH_CPU_INTEL_AVX512, GP_PLUGIN_EVAL_TORCH_CPU_INTEL_AVX512, "torch_cpu_intel_avx512") \
    X(GP_ADAMW_TORCH_CPU_HOST, GP_PLUGIN_EVAL_TORCH_CPU_HOST, "torch_cpu_host")                    \
    X(GP_ADAMW_TORCH_CPU_FOREACH, GP_PLUGIN_EVAL_TORCH_CPU_FOREACH, "torch_cpu_foreach")

/* Optimizer state storage (gp_lowbit, kernels/cpu/gp_lowbit.h; GP_PLUGIN_STATE_*): plain (m, v
 * in a float format, not a name optimizer.state takes), then the low-bit states
 * optimizer.state names. */
#define GP_VOCAB_LOWBIT_STATES(X)                                                                  \
    X(GP_LOWBIT_NONE, GP_PLUGIN_STATE_PLAIN, "plain")                                              \
    X(GP_LOWBIT_BNB8, GP_PLUGIN_STATE_BNB8_BLOCKWISE, "bnb8_blockwise")                            \
    X(GP_LOWBIT_TORCHAO8, GP_PLUGIN_STATE_TORCHAO_8BIT, "torchao_8bit")                            \
    X(GP_LOWBIT_TORCHAO4, GP_PLUGIN_STATE_TORCHAO_4BIT, "torchao_4bit")                            \
    X(GP_LOWBIT_TORCHAO_FP8, GP_PLUGIN_STATE_TORCHAO_FP8, "torchao_fp8")

/* Each list's length, as a constant expression: GP_VOCAB_COUNT(GP_VOCAB_ACC_ROUNDINGS). */
#define GP_VOCAB_PLUS_ONE(...) +1
#define GP_VOCAB_COUNT(LIST) (0 LIST(GP_VOCAB_PLUS_ONE))
/* An X for a list's names alone: {GP_VOCAB_ACC_ROUNDINGS(GP_VOCAB_NAME_ABI)}. */
#define GP_VOCAB_NAME_ABI(E, A, NAME) NAME,

/* The vocabularies by kind, for gp_vocab_name (and the C API's gradprec_vocab_name). */
typedef enum {
    GP_VOCAB_FORMAT = 0,
    GP_VOCAB_RMODE = 1,
    GP_VOCAB_ACC_ROUNDING = 2,
    GP_VOCAB_ADAMW_VARIANT = 3,
    GP_VOCAB_ADAMW_EVAL = 4,
    GP_VOCAB_LOWBIT_STATE = 5,
    GP_VOCAB_NKINDS = 6
} gp_vocab_kind;

/* The kind's name as the C API spells it: "format", "rounding", "acc_rounding",
 * "adamw_variant", "adamw_evaluation", "state"; NULL past the end. */
const char *gp_vocab_kind_name(gp_vocab_kind k);
/* The name of value i of kind k (i = the enum value = the ABI value), NULL past the end. */
const char *gp_vocab_name(gp_vocab_kind k, int i);
/* The number of values of kind k (0 for an unknown kind). */
int gp_vocab_count(gp_vocab_kind k);
/* The value named s in kind k, or -1. */
int gp_vocab_parse(gp_vocab_kind k, const char *s);

#endif
