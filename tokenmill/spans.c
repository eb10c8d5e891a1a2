/* The gather of spans.py: spans of bytes from several buffers, copied one after the other into
 * one. Built by scripts/hatch_build.py; loaded by ctypes. */

#include <stdint.h>
#include <string.h>

/* Span i is sizes[i] bytes at begins[i] of the buffer at address sources[which[i]]; written to
 * out back to back. Returns the bytes written. The caller checks every span's bounds. */
int64_t gather_spans(const uint64_t *sources, const int64_t *which, const int64_t *begins,
                     const int64_t *sizes, int64_t n, uint8_t *out) {
    int64_t filled = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(out + filled, (const uint8_t *)(uintptr_t)sources[which[i]] + begins[i],
               (size_t)sizes[i]);
        filled += sizes[i];
    }
    return filled;
}
