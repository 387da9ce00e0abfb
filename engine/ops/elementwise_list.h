/* The elementwise ops that fused_elementwise programs are made of, listed once. Every copy
 * that used to be typed by hand comes from this list:
 *   - FusedCode (engine/ops/fused.h): Input, Const, then the entries in this order;
 *   - the program names, registry ops, operand and attribute counts (fused_program.cpp);
 *   - the CPU's plain kernels and its fused interpreter (engine/cpu/elementwise_dispatch.h);
 *   - the Vulkan shaders' dispatch (gpu/vulkan/shaders/ew_apply.glsl, with the numbers that
 *     gpu/vulkan/fused_codes.cmake generates at build time) and the Vulkan kernels;
 *   - the CUDA interpreter (gpu/cuda/device/elementwise.cu) and the CUDA kernels.
 * Each op's formula is written once per language, under a name made from `text`:
 *   C++   mls::cpu::scalar::text  (engine/cpu/scalar_math.h)
 *   GLSL  text_                   (gpu/vulkan/shaders/common.glsl)
 *   CUDA  mls::cuda::dev::text_f  (gpu/cuda/device/common.cuh)
 * with the arguments (a[, b][, p0[, p1]]): its operands, then its attributes. An entry
 * without a formula in some language fails that language's build, naming the formula.
 *
 *   X(Name, text, op, operands, params)
 *     Name      FusedCode::Name
 *     text      the name in a program's text ("relu(x0)") and in the formulas' names
 *     op        the registry op (OpDef) it stands for; several codes may share one op, told
 *               apart by an attribute (fused_program.cpp: kVariants)
 *     operands  1 or 2
 *     params    0, 1 or 2 float attributes, p0 and p1 (fused_program.cpp: kParams)
 *
 * This file is read by C++, by nvcc and by glslc, and by the generator's regular
 * expression: preprocessor lines only, no string literals, and only block comments inside
 * the list (a line comment would swallow the line continuation). Adding an entry anywhere
 * renumbers the codes after it everywhere at once: no number is written down by hand.
 */
#ifndef MLS_ENGINE_OPS_ELEMENTWISE_LIST_H
#define MLS_ENGINE_OPS_ELEMENTWISE_LIST_H

#define MLS_ELEMENTWISE(X)                                     \
  /* unary */                                                  \
  X(Neg, neg, neg, 1, 0)                                       \
  X(Abs, abs, abs, 1, 0)                                       \
  X(Exp, exp, exp, 1, 0)                                       \
  X(Log, log, log, 1, 0)                                       \
  X(Sqrt, sqrt, sqrt, 1, 0)                                    \
  X(Rsqrt, rsqrt, rsqrt, 1, 0)                                 \
  X(Tanh, tanh, tanh, 1, 0)                                    \
  X(Sigmoid, sigmoid, sigmoid, 1, 0)                           \
  X(Relu, relu, relu, 1, 0)                                    \
  X(Silu, silu, silu, 1, 0)                                    \
  X(Gelu, gelu, gelu, 1, 0)                                    \
  X(GeluTanh, gelu_tanh, gelu, 1, 0)                           \
  X(LeakyRelu, leaky_relu, leaky_relu, 1, 1)                   \
  X(Softplus, softplus, softplus, 1, 2)                        \
  X(Clamp, clamp, clamp, 1, 2)                                 \
  X(Scale, scale, scale, 1, 1)                                 \
  X(AddScalar, add_scalar, add_scalar, 1, 1)                   \
  X(Sin, sin, sin, 1, 0)                                       \
  X(Cos, cos, cos, 1, 0)                                       \
  /* binary */                                                 \
  X(Add, add, add, 2, 0)                                       \
  X(Sub, sub, sub, 2, 0)                                       \
  X(Mul, mul, mul, 2, 0)                                       \
  X(Div, div, div, 2, 0)                                       \
  X(Maximum, maximum, maximum, 2, 0)                           \
  X(Minimum, minimum, minimum, 2, 0)                           \
  X(Pow, pow, pow, 2, 0)                                       \
  X(ReluBackward, relu_backward, relu_backward, 2, 0)          \
  X(GeluBackward, gelu_backward, gelu_backward, 2, 0)          \
  X(GeluTanhBackward, gelu_tanh_backward, gelu_backward, 2, 0) \
  X(ClampBackward, clamp_backward, clamp_backward, 2, 2)

/* The activations a GEMM or convolution epilogue applies (linear_act's and conv2d_act's
 * "act" attribute), after None (no activation, number 0), in this order. Each applies the
 * formula of the elementwise entry above with the same Name and text, so no formula is
 * written again; only unary entries without attributes can be epilogues. From this list come
 * EpilogueAct and kEpilogueActs (engine/ops/fused.h), the CPU's epilogue (engine/cpu/gemm.cpp),
 * the shaders' epilogue() (gpu/vulkan/shaders/epilogue.glsl, numbered by fused_codes.cmake),
 * and the CUDA Act enum and epilogue() (gpu/cuda/device/launch.h, common.cuh). An act whose
 * formula a language lacks fails that language's build, naming the formula.
 *
 *   X(Name, text)
 *     Name      EpilogueAct::Name, and the elementwise entry FusedCode::Name it applies
 *     text      the act's name in the attribute ("relu"), the entry's text
 */
#define MLS_EPILOGUE_ACTS(X) \
  X(Relu, relu)              \
  X(Sigmoid, sigmoid)        \
  X(Tanh, tanh)              \
  X(Gelu, gelu)              \
  X(Silu, silu)

/* The call of formula f for an entry with these operand and attribute counts, given both
 * operands a, b and both attributes p0, p1 (it passes the ones the entry has). */
#define MLS_EW_CALL(operands, params, f, a, b, p0, p1) \
  MLS_EW_CALL_##operands##_##params(f, a, b, p0, p1)
#define MLS_EW_CALL_1_0(f, a, b, p0, p1) f(a)
#define MLS_EW_CALL_1_1(f, a, b, p0, p1) f(a, p0)
#define MLS_EW_CALL_1_2(f, a, b, p0, p1) f(a, p0, p1)
#define MLS_EW_CALL_2_0(f, a, b, p0, p1) f(a, b)
#define MLS_EW_CALL_2_1(f, a, b, p0, p1) f(a, b, p0)
#define MLS_EW_CALL_2_2(f, a, b, p0, p1) f(a, b, p0, p1)

#endif
