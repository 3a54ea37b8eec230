/* d500 custom operators: the C ABI, version 1.
 *
 * A shared library implements one of d500's level-0 operators (conv2d, pool2d, batchnorm, relu,
 * softmax) and exports one function:
 *
 *     const struct d500_custom_op_v1* d500_custom_op_v1(void);
 *
 * A campaign runs it with backend = "custom" and library = "/path/to/libmyop.so". d500 loads the
 * library with dlopen, checks `abi_version` and `op`, fills the inputs with the same random numbers
 * as every other backend, calls `create` (untimed), validates the outputs of one `run` against its
 * double-precision reference, and only then times `run`. Tensors are float32, dense, row-major in
 * the dimension order given (NCHW activations, KCRS convolution weights); their order, names and
 * dimensions are those of the built-in operator (see hdf5-schema/README.md, "Operators").
 *
 * `run` must compute all outputs from the inputs each time, and return only when they are
 * written (synchronise any device work). It must not allocate if the figure is to be comparable
 * with the built-in backends, whose timed calls do not.
 */
#ifndef D500_CUSTOM_OP_H
#define D500_CUSTOM_OP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define D500_CUSTOM_OP_ABI_VERSION 1

struct d500_tensor {
  const char* name; /* "x", "w", "y", "dy", ... */
  int ndim;
  const int64_t* dims;
  float* data; /* inputs: read only; outputs: to be written by run() */
};

struct d500_param {
  const char* name; /* every integer parameter of the point: "n", "c", "stride", ... */
  int64_t value;
};

struct d500_custom_op_v1 {
  int abi_version;  /* D500_CUSTOM_OP_ABI_VERSION */
  const char* op;   /* the operator implemented: "relu", "conv2d", ... */
  const char* name; /* shown in reports, e.g. "my fused relu 0.3" */
  /* Prepare to compute `pass` ("forward", "backward", "backward_data", "backward_filter") of the
   * problem. Returns 0 and sets *state, or non-zero with a message in err (errlen bytes). */
  int (*create)(const char* pass, const struct d500_param* params, int nparams, const struct d500_tensor* inputs,
                int ninputs, const struct d500_tensor* outputs, int noutputs, void** state, char* err, size_t errlen);
  int (*run)(void* state); /* 0 on success */
  void (*destroy)(void* state);
};

typedef const struct d500_custom_op_v1* (*d500_custom_op_v1_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
