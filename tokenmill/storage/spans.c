/* Many byte spans copied in one call, from a buffer or a file's map: a release moves each of
 * its documents' tokens on its own (tokenmill/release/shards.py), where a Python call per
 * document cost as much again as the copy or the read. Loaded with ctypes by tokenmill/storage/spans.py;
 * compiled when the project is installed (scripts/hatch_build.py). */
#include <stdint.h>
#include <string.h>

/* sizes[i] bytes at source + from[i] to target + to[i], for i < n. */
void copy_spans(char *target, const char *source, const int64_t *from, const int64_t *sizes,
                const int64_t *to, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        memcpy(target + to[i], source + from[i], (size_t)sizes[i]);
}
