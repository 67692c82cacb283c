/* Golden GGUF block bytes from ggml's own C reference quantisers.
 *
 * Reads float32 weights (native little-endian, a multiple of 256 values) on stdin and writes
 * the bytes of quantize_row_q4_K_ref / quantize_row_q6_K_ref / quantize_row_q8_0_ref on stdout,
 * one row per 256 weights.  Nothing of ggml is copied here: this file is compiled together with
 * an unmodified upstream src/ggml-quants.c (see make_golden.py, which builds and runs it):
 *
 *   gcc -std=gnu11 -O2 -ffp-contract=off -I$GGML/include -I$GGML/src -I$GGML/src/ggml-cpu \
 *       gen_golden.c $GGML/src/ggml-quants.c -lm -o gen_golden
 *   ./gen_golden q4_k < weights.f32 > weights.q4_k
 *
 * -ffp-contract=off: no fused multiply-add contraction, the plain float32 arithmetic of the C
 * source (what a default x86-64 build does anyway).  Asserts stay on: nearest_int's range assert
 * fires if an input leaves the domain ggml's reference is defined on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include "ggml-quants.h"

/* ggml-quants.c references these from ggml.c; none is reached by the *_ref quantisers. */
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ggml_abort %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; abort(); }

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s q4_k|q6_k|q8_0 < in.f32 > out.bin\n", argv[0]);
        return 2;
    }
    const char * fmt = argv[1];
    float x[QK_K];
    union { block_q4_K q4_k; block_q6_K q6_k; block_q8_0 q8_0[QK_K / QK8_0]; } row;
    const unsigned char * out = (const unsigned char *) &row;
    size_t n;
    while ((n = fread(x, sizeof(float), QK_K, stdin)) == QK_K) {
        size_t nbytes;
        if (!strcmp(fmt, "q4_k")) {
            quantize_row_q4_K_ref(x, &row.q4_k, QK_K);
            nbytes = sizeof(block_q4_K);
        } else if (!strcmp(fmt, "q6_k")) {
            quantize_row_q6_K_ref(x, &row.q6_k, QK_K);
            nbytes = sizeof(block_q6_K);
        } else if (!strcmp(fmt, "q8_0")) {
            quantize_row_q8_0_ref(x, row.q8_0, QK_K);
            nbytes = sizeof(row.q8_0);
        } else {
            fprintf(stderr, "unknown format %s\n", fmt);
            return 2;
        }
        if (fwrite(out, 1, nbytes, stdout) != nbytes) return 1;
    }
    if (n != 0) {
        fprintf(stderr, "input is not a multiple of %d float32 values\n", QK_K);
        return 1;
    }
    return 0;
}
