/* The normalized words of ngrams.py and their n-grams, over the UTF-8 texts of an Arrow string
 * array. A word is a run of letters, marks and digits (class WORD), each code point folded
 * (ngrams.fold_table: NFKC, then lower case); a code point of a script written without spaces
 * (class SINGLE: Han, Kana, Thai...) is a word by itself, with the marks that follow it. Every
 * other character separates words: punctuation and white space fold away. A word's hash is
 * FNV-1a over its folded code points; an n-gram's is a polynomial of its words' hashes, mixed.
 * Built by hatch_build.py; loaded by ctypes. */

#include <stdint.h>
#include <stdlib.h>

#include "utf8.h"

enum { WORD = 1, SINGLE = 2, MARK = 4 };
enum { AHEAD = 16 }; /* bitmap words fetched ahead of their test */

static const uint64_t FNV_OFFSET = 14695981039346656037ULL;
static const uint64_t FNV_PRIME = 1099511628211ULL;
static const uint64_t BASE = 0x9E3779B97F4A7C15ULL; /* odd: powers never vanish mod 2^64 */

static inline uint64_t mixed(uint64_t h) { /* splitmix64's finalizer */
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    return h ^ (h >> 31);
}

/* The words of data[start:end]: their hashes and, when asked, their first and past-the-end
 * character offsets in the text; their number. */
static int64_t words_of(const uint8_t *data, int64_t start, int64_t end, const uint8_t *classes,
                        const int32_t *fold, uint64_t *hashes, int64_t *starts, int64_t *ends) {
    int64_t n = 0, chars = 0;
    int in_word = 0, single = 0;
    uint64_t h = 0;
    for (int64_t i = start; i < end; chars++) {
        int size;
        int32_t c = code_point_at(data, i, &size);
        i += size;
        uint8_t kind = classes[c];
        int begins = 0;
        if (!(kind & WORD)) {
            if (in_word) {
                hashes[n] = h;
                if (ends) ends[n] = chars;
                n++;
                in_word = 0;
            }
            continue;
        }
        if (kind & SINGLE)
            begins = 1;
        else if (!in_word)
            begins = 1;
        else if (single && !(kind & MARK))
            begins = 1;
        if (begins) {
            if (in_word) {
                hashes[n] = h;
                if (ends) ends[n] = chars;
                n++;
            }
            in_word = 1;
            single = (kind & SINGLE) != 0;
            h = FNV_OFFSET;
            if (starts) starts[n] = chars;
        }
        uint32_t folded = (uint32_t)fold[c];
        for (int b = 0; b < 4; b++) {
            h ^= (folded >> (8 * b)) & 0xFF;
            h *= FNV_PRIME;
        }
    }
    if (in_word) {
        hashes[n] = h;
        if (ends) ends[n] = chars;
        n++;
    }
    return n;
}

/* Every text's words: hashes (room for as many as the texts have bytes), each text's number
 * of words (doc_words) and, unless NULL, character offsets. Their total. */
int64_t text_words(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                   const uint8_t *classes, const int32_t *fold, uint64_t *hashes,
                   int64_t *doc_words, int64_t *starts, int64_t *ends) {
    int64_t total = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t n = words_of(data, offsets[d], offsets[d + 1], classes, fold, hashes + total,
                             starts ? starts + total : NULL, ends ? ends + total : NULL);
        doc_words[d] = n;
        total += n;
    }
    return total;
}

/* The hashes of the n-grams of `count` words, from their hashes, into out (count - n + 1 of
 * them, or none). Rolling: each n-gram's polynomial from the previous one's. */
static int64_t ngrams_of(const uint64_t *words, int64_t count, int64_t n, uint64_t top,
                         uint64_t *out) {
    if (count < n) return 0;
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i++) h = h * BASE + words[i];
    out[0] = mixed(h);
    for (int64_t i = n; i < count; i++) {
        h = (h - words[i - n] * top) * BASE + words[i];
        out[i - n + 1] = mixed(h);
    }
    return count - n + 1;
}

static uint64_t power(uint64_t base, int64_t exponent) {
    uint64_t result = 1;
    for (int64_t i = 0; i < exponent; i++) result *= base;
    return result;
}

/* The n-grams of each group of words (doc_words: words per group), into out; their total. */
int64_t word_ngrams(const uint64_t *words, const int64_t *doc_words, int64_t n_docs, int64_t n,
                    uint64_t *out, int64_t *doc_ngrams) {
    uint64_t top = power(BASE, n - 1);
    int64_t total = 0, first = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        doc_ngrams[d] = ngrams_of(words + first, doc_words[d], n, top, out + total);
        total += doc_ngrams[d];
        first += doc_words[d];
    }
    return total;
}

/* The first index of key in sorted[0:m], or -1. */
static int64_t position(const uint64_t *sorted, int64_t m, uint64_t key) {
    int64_t low = 0, high = m;
    while (low < high) {
        int64_t mid = low + (high - low) / 2;
        if (sorted[mid] < key)
            low = mid + 1;
        else
            high = mid;
    }
    return low < m && sorted[low] == key ? low : -1;
}

static int grow(void **buffer, int64_t *room, int64_t need, size_t item) {
    if (need <= *room) return 0;
    int64_t size = need > 2 * *room ? need : 2 * *room;
    void *more = realloc(*buffer, (size_t)size * item);
    if (!more) return -1;
    *buffer = more;
    *room = size;
    return 0;
}

/* The n-grams of the texts found in a table: sorted[0:m], the sorted hashes of its n-grams,
 * and a bitmap of 2^bits bits, one set at the top bits of each. A text's n-grams are hashed
 * first, then each one's bitmap word is fetched a few n-grams ahead of its test (the bitmap of
 * ten million n-grams does not fit in a cache); only those whose bit is set are looked up.
 * Per match: the text, its first word and the table's entry, at most `capacity` of them.
 * Returns the number of matches (more than capacity: call again with room for them), or -1
 * when memory ran out. */
int64_t find_ngrams(const uint8_t *data, const int64_t *offsets, int64_t n_docs,
                    const uint8_t *classes, const int32_t *fold, int64_t n,
                    const uint64_t *bitmap, int64_t bits, const uint64_t *sorted, int64_t m,
                    int64_t *match_doc, int64_t *match_word, int64_t *match_entry,
                    int64_t capacity) {
    uint64_t top = power(BASE, n - 1);
    uint64_t *words = NULL, *grams = NULL;
    int64_t words_room = 0, grams_room = 0, found = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t bytes = offsets[d + 1] - offsets[d];
        if (grow((void **)&words, &words_room, bytes + 1, sizeof(uint64_t)) ||
            grow((void **)&grams, &grams_room, bytes + 1, sizeof(uint64_t))) {
            found = -1;
            break;
        }
        int64_t count =
            words_of(data, offsets[d], offsets[d + 1], classes, fold, words, NULL, NULL);
        int64_t k = ngrams_of(words, count, n, top, grams);
        for (int64_t i = 0; i < k && i < AHEAD; i++)
            __builtin_prefetch(&bitmap[grams[i] >> (64 - bits) >> 6]);
        for (int64_t i = 0; i < k; i++) {
            if (i + AHEAD < k) __builtin_prefetch(&bitmap[grams[i + AHEAD] >> (64 - bits) >> 6]);
            uint64_t bit = grams[i] >> (64 - bits);
            if (!((bitmap[bit >> 6] >> (bit & 63)) & 1)) continue;
            int64_t entry = position(sorted, m, grams[i]);
            if (entry < 0) continue;
            if (found < capacity) {
                match_doc[found] = d;
                match_word[found] = i;
                match_entry[found] = entry;
            }
            found++;
        }
    }
    free(words);
    free(grams);
    return found;
}
