/* convert.c - the public scalar conversions between fp32 and the small float formats (bf16,
 * f16, e4m3, e2m1): thin wrappers over numerics/scalar.h, where each rule is written once for
 * the CPU kernels, the CUDA kernels and the tests (round to nearest even throughout). */
#include "idxlab.h"
#include "numerics/scalar.h"

uint16_t ixl_f32_to_bf16(float x) { return ixl_cvt_f32_to_bf16(x); }
float ixl_bf16_to_f32(uint16_t x) { return ixl_cvt_bf16_to_f32(x); }
uint16_t ixl_f32_to_f16(float x) { return ixl_cvt_f32_to_f16(x); }
float ixl_f16_to_f32(uint16_t h) { return ixl_cvt_f16_to_f32(h); }
uint8_t ixl_f32_to_e4m3(float x) { return ixl_cvt_f32_to_e4m3(x); }
float ixl_e4m3_to_f32(uint8_t x) { return ixl_cvt_e4m3_to_f32(x); }
float ixl_e2m1_to_f32(uint8_t code) { return ixl_cvt_e2m1_to_f32(code); }

int ixl_format_value_bytes(ixl_kv_format fmt) {
  switch (fmt) {
    case IXL_MXFP4: return 64;
    case IXL_MXFP8:
    case IXL_FP8: return 128;
    default: return 0;
  }
}
