/* Many byte spans copied in one call, from a buffer or read from a file: a release moves each of
 * its documents' tokens on its own (tokenmill/release_shards.py), where a Python call per
 * document cost as much again as the copy or the read. Loaded with ctypes by tokenmill/spans.py;
 * compiled when the project is installed (scripts/hatch_build.py). */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* sizes[i] bytes at source + from[i] to target + to[i], for i < n. */
void copy_spans(char *target, const char *source, const int64_t *from, const int64_t *sizes,
                const int64_t *to, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        memcpy(target + to[i], source + from[i], (size_t)sizes[i]);
}

/* sizes[i] bytes at offset from[i] of the file `descriptor` to target + to[i], for i < n.
 * Returns n, or the first i whose read failed or came short (the file changed or ended). */
int64_t read_spans(int descriptor, char *target, const int64_t *from, const int64_t *sizes,
                   const int64_t *to, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int64_t done = 0;
        while (done < sizes[i]) {
            ssize_t got = pread(descriptor, target + to[i] + done, (size_t)(sizes[i] - done),
                                (off_t)(from[i] + done));
            if (got <= 0)
                return i;
            done += got;
        }
    }
    return n;
}
