/* Exact cl100k_base and o200k_base token counts without building the token list.
 *
 * Counting a long conversation exactly is the cost hermeslab pays where Hermes
 * divides characters by four, so this does only what a count needs: split the
 * text as tiktoken's pattern for the encoding splits it, answer a piece that is
 * a token with one hash lookup, and merge the rest by lowest rank as tiktoken's
 * byte-pair merge does (a heap for long pieces, so a run of one letter stays
 * linear-logarithmic).
 *
 * The patterns, alternative by alternative (tried in this order at each piece start);
 * \s is Unicode White_Space and $ the end of the text. cl100k_base:
 *   '(?i:[sdmt]|ll|ve|re)  |  [^\r\n\p{L}\p{N}]?+\p{L}++  |  \p{N}{1,3}+  |
 *   ' '?[^\s\p{L}\p{N}]++[\r\n]*+  |  \s++$  |  \s*[\r\n]  |  \s+(?!\S)  |  \s
 * o200k_base, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and
 * C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
 *   [^\r\n\p{L}\p{N}]?U*W+C?  |  [^\r\n\p{L}\p{N}]?U+W*C?  |  \p{N}{1,3}  |
 *   ' '?[^\s\p{L}\p{N}]+[\r\n/]*  |  \s*[\r\n]+  |  \s+(?!\S)  |  \s+
 *
 * A character whose Unicode category this Python does not know (its database may
 * be older than tiktoken's) or a lone surrogate makes the whole text go to the
 * fallback counter given at construction, so no count is ever guessed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    CLASS_UNKNOWN = 0,  /* not yet looked up */
    CLASS_UPPER,        /* Lu, Lt */
    CLASS_LOWER,        /* Ll */
    CLASS_OTHER_LETTER,       /* Lm, Lo */
    CLASS_MARK,         /* Mn, Mc, Me */
    CLASS_NUMBER,       /* \p{N} */
    CLASS_SPACE,        /* \s other than \r and \n */
    CLASS_NEWLINE,      /* \r or \n */
    CLASS_OTHER,
    CLASS_UNASSIGNED,   /* defer the text */
};

/* Sets of classes, as bit masks. */
#define IN(cls, set) ((1u << (cls)) & (set))
#define BIT(cls) (1u << (cls))
#define LETTERS (BIT(CLASS_UPPER) | BIT(CLASS_LOWER) | BIT(CLASS_OTHER_LETTER))
#define SYMBOLS (BIT(CLASS_MARK) | BIT(CLASS_OTHER))          /* [^\s\p{L}\p{N}] */
#define PREFIXES (SYMBOLS | BIT(CLASS_SPACE))                 /* [^\r\n\p{L}\p{N}] */
#define UPPERISH (BIT(CLASS_UPPER) | BIT(CLASS_OTHER_LETTER) | BIT(CLASS_MARK)) /* o200k's U */
#define LOWERISH (BIT(CLASS_LOWER) | BIT(CLASS_OTHER_LETTER) | BIT(CLASS_MARK)) /* o200k's W */

enum { PATTERN_CL100K, PATTERN_O200K };

#define NO_RANK UINT32_MAX
#define CODE_POINTS 0x110000
#define HEAP_FROM 64 /* pieces longer than this merge through a heap */

typedef struct {
    uint64_t head;   /* the token's first (up to) eight bytes, zero padded */
    uint32_t rank;   /* NO_RANK: empty slot */
    uint32_t place;  /* offset into the byte blob << 8 | length */
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *slots;
    uint32_t mask;
    uint32_t max_length;
    uint8_t *blob;
    uint32_t *pair_ranks; /* rank of every two-byte token, by its bytes (the first merges look here) */
    uint8_t *classes;     /* per code point, filled as code points are met */
    PyObject *fallback;   /* counts a text this module defers */
    PyObject *category;   /* unicodedata.category */
    int pattern;
} Counter;

static uint8_t ascii_class[128];

/* ---------------------------------------------------------------- the rank table */

static inline uint64_t load_head(const uint8_t *s, size_t n)
{
    uint64_t w = 0;
    if (n >= 8) {
        memcpy(&w, s, 8);
        return w;
    }
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    return w;
}

static inline uint32_t hash_bytes(const uint8_t *s, size_t n, uint64_t head)
{
    uint64_t h = (head ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ULL;
    for (size_t i = 8; i < n; i += 8) {
        h ^= h >> 29;
        h = (h ^ load_head(s + i, n - i < 8 ? n - i : 8)) * 0xC4CEB9FE1A85EC53ULL;
    }
    h ^= h >> 32;
    return (uint32_t)h;
}

static inline uint32_t rank_of(const Counter *self, const uint8_t *s, size_t n)
{
    if (n > self->max_length)
        return NO_RANK;
    uint64_t head = load_head(s, n);
    uint32_t i = hash_bytes(s, n, head) & self->mask;
    for (;;) {
        const Slot *slot = &self->slots[i];
        if (slot->rank == NO_RANK)
            return NO_RANK;
        if (slot->head == head && (slot->place & 0xFF) == n
                && (n <= 8 || memcmp(self->blob + (slot->place >> 8) + 8, s + 8, n - 8) == 0))
            return slot->rank;
        i = (i + 1) & self->mask;
    }
}

static int base64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decode one base64 token into out; its length, or -1 when it is not base64. */
static Py_ssize_t base64_decode(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t length = 0;
    uint32_t bits = 0;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=')
            break;
        int v = base64_value(s[i]);
        if (v < 0)
            return -1;
        bits = (bits << 6) | (uint32_t)v;
        count += 6;
        if (count >= 8) {
            count -= 8;
            out[length++] = (uint8_t)(bits >> count);
        }
    }
    return (Py_ssize_t)length;
}

/* Parse "base64 rank" lines into the hash table; 0, or -1 with an exception set. */
static int load_ranks(Counter *self, const uint8_t *data, size_t n)
{
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += data[i] == '\n';
    uint32_t size = 1024;
    while (size < 2 * (lines + 1))
        size <<= 1;
    self->mask = size - 1;
    self->slots = PyMem_Malloc(sizeof(Slot) * size);
    self->blob = PyMem_Malloc(n + 8);
    self->pair_ranks = PyMem_Malloc(sizeof(uint32_t) * 65536);
    if (self->slots == NULL || self->blob == NULL || self->pair_ranks == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < size; i++)
        self->slots[i].rank = NO_RANK;
    for (uint32_t i = 0; i < 65536; i++)
        self->pair_ranks[i] = NO_RANK;
    size_t used = 0, line = 0;
    const uint8_t *p = data, *end = data + n;
    while (p < end) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        line++;
        if (eol > p) {
            const uint8_t *space = memchr(p, ' ', (size_t)(eol - p));
            if (space == NULL || space == p || space + 1 == eol) {
                PyErr_Format(PyExc_ValueError, "rank line %zu: expected 'base64 rank'", line);
                return -1;
            }
            uint64_t rank = 0;
            for (const uint8_t *d = space + 1; d < eol; d++) {
                if (*d < '0' || *d > '9' || rank >= NO_RANK / 10) {
                    PyErr_Format(PyExc_ValueError, "rank line %zu: the rank is not a number", line);
                    return -1;
                }
                rank = rank * 10 + (uint64_t)(*d - '0');
            }
            uint8_t *token = self->blob + used;
            Py_ssize_t length = base64_decode(p, (size_t)(space - p), token);
            if (length <= 0 || length > 255 || used >= (1u << 24)) {
                PyErr_Format(PyExc_ValueError, "rank line %zu: the token is not base64 of 1 to 255 bytes", line);
                return -1;
            }
            if (length == 2)
                self->pair_ranks[token[0] | (token[1] << 8)] = (uint32_t)rank;
            uint64_t head = load_head(token, (size_t)length);
            uint32_t i = hash_bytes(token, (size_t)length, head) & self->mask;
            while (self->slots[i].rank != NO_RANK)
                i = (i + 1) & self->mask;
            self->slots[i] = (Slot){head, (uint32_t)rank, (uint32_t)(used << 8 | (size_t)length)};
            if ((uint32_t)length > self->max_length)
                self->max_length = (uint32_t)length;
            used += (size_t)length;
        }
        p = eol + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- byte-pair merge */

/* Tokens of a piece that is not one token: tiktoken's merge, lowest rank first, leftmost on ties. */
static Py_ssize_t merge_short(const Counter *self, const uint8_t *s, uint32_t n)
{
    uint32_t starts[HEAP_FROM + 1], ranks[HEAP_FROM];
    uint32_t parts = n;
    for (uint32_t k = 0; k <= n; k++)
        starts[k] = k;
    for (uint32_t k = 0; k + 1 < n; k++)
        ranks[k] = self->pair_ranks[s[k] | (s[k + 1] << 8)];
    ranks[n - 1] = NO_RANK;
    for (;;) {
        uint32_t best = NO_RANK, at = 0;
        for (uint32_t k = 0; k + 1 < parts; k++) {
            if (ranks[k] < best) {
                best = ranks[k];
                at = k;
            }
        }
        if (best == NO_RANK)
            break;
        /* part at+1 joins part at */
        memmove(starts + at + 1, starts + at + 2, sizeof(uint32_t) * (parts - at - 1));
        memmove(ranks + at + 1, ranks + at + 2, sizeof(uint32_t) * (parts - at - 2));
        parts--;
        ranks[at] = at + 1 < parts ? rank_of(self, s + starts[at], starts[at + 2] - starts[at]) : NO_RANK;
        if (at > 0)
            ranks[at - 1] = rank_of(self, s + starts[at - 1], starts[at + 1] - starts[at - 1]);
    }
    return parts;
}

static inline void heap_push(uint64_t *heap, size_t *size, uint64_t key)
{
    size_t i = (*size)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap[parent] <= key)
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = key;
}

static inline uint64_t heap_pop(uint64_t *heap, size_t *size)
{
    uint64_t top = heap[0], last = heap[--(*size)];
    size_t i = 0, n = *size;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && heap[child + 1] < heap[child])
            child++;
        if (heap[child] >= last)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (n > 0)
        heap[i] = last;
    return top;
}

/* The same merge for a long piece: parts named by their first byte, candidate merges in a heap
 * keyed by (rank, position). A part's merge string only grows, and ranks are unique, so a popped
 * key whose rank is no longer its part's is stale. */
static Py_ssize_t merge_long(const Counter *self, const uint8_t *s, uint32_t n)
{
    uint32_t *next = PyMem_Malloc(sizeof(uint32_t) * (n + 1));
    uint32_t *prev = PyMem_Malloc(sizeof(uint32_t) * (n + 1));
    uint32_t *ranks = PyMem_Malloc(sizeof(uint32_t) * (n + 1));
    uint64_t *heap = PyMem_Malloc(sizeof(uint64_t) * (3 * (size_t)n + 1));
    Py_ssize_t parts = -1;
    if (next == NULL || prev == NULL || ranks == NULL || heap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t size = 0;
    for (uint32_t k = 0; k <= n; k++) {
        next[k] = k + 1;
        prev[k] = k - 1; /* wraps for the first part: never read */
        ranks[k] = k + 1 < n ? self->pair_ranks[s[k] | (s[k + 1] << 8)] : NO_RANK;
        if (ranks[k] != NO_RANK)
            heap_push(heap, &size, ((uint64_t)ranks[k] << 32) | k);
    }
    parts = n;
    while (size > 0) {
        uint64_t key = heap_pop(heap, &size);
        uint32_t a = (uint32_t)key, rank = (uint32_t)(key >> 32);
        if (ranks[a] != rank)
            continue;
        uint32_t b = next[a];
        next[a] = next[b];
        prev[next[b]] = a;
        ranks[b] = NO_RANK;
        parts--;
        ranks[a] = next[a] < n ? rank_of(self, s + a, next[next[a]] - a) : NO_RANK;
        if (ranks[a] != NO_RANK)
            heap_push(heap, &size, ((uint64_t)ranks[a] << 32) | a);
        if (a > 0) {
            uint32_t p = prev[a];
            ranks[p] = rank_of(self, s + p, next[a] - p);
            if (ranks[p] != NO_RANK)
                heap_push(heap, &size, ((uint64_t)ranks[p] << 32) | p);
        }
    }
done:
    PyMem_Free(next);
    PyMem_Free(prev);
    PyMem_Free(ranks);
    PyMem_Free(heap);
    return parts;
}

static inline Py_ssize_t piece_tokens(const Counter *self, const uint8_t *s, size_t n)
{
    if (n == 1 || rank_of(self, s, n) != NO_RANK)
        return 1;
    if (n > UINT32_MAX / 4) {
        PyErr_SetString(PyExc_OverflowError, "a piece of text is too long to count");
        return -1;
    }
    return n <= HEAP_FROM ? merge_short(self, s, (uint32_t)n) : merge_long(self, s, (uint32_t)n);
}

/* ---------------------------------------------------------------- the pattern */

static int is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680
        || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F
        || c == 0x3000;
}

/* The class of code point c from Python's Unicode database, remembered; CLASS_UNKNOWN on error. */
static uint8_t look_up_class(Counter *self, uint32_t c)
{
    uint8_t cls;
    if (is_white_space(c)) {
        cls = CLASS_SPACE;
    }
    else {
        PyObject *character = PyUnicode_FromOrdinal((int)c);
        if (character == NULL)
            return CLASS_UNKNOWN;
        PyObject *category = PyObject_CallOneArg(self->category, character);
        Py_DECREF(character);
        if (category == NULL)
            return CLASS_UNKNOWN;
        const char *name = PyUnicode_AsUTF8(category);
        if (name == NULL) {
            Py_DECREF(category);
            return CLASS_UNKNOWN;
        }
        if (name[0] == 'L')
            cls = name[1] == 'l' ? CLASS_LOWER : name[1] == 'u' || name[1] == 't' ? CLASS_UPPER : CLASS_OTHER_LETTER;
        else if (name[0] == 'M')
            cls = CLASS_MARK;
        else if (name[0] == 'N')
            cls = CLASS_NUMBER;
        else if (name[0] == 'C' && name[1] == 'n')
            cls = CLASS_UNASSIGNED;
        else
            cls = CLASS_OTHER;
        Py_DECREF(category);
    }
    self->classes[c] = cls;
    return cls;
}

/* The class of the character at s[i] and its length in bytes (UTF-8 is valid: it came from Python). */
static inline uint8_t class_at(Counter *self, const uint8_t *s, size_t i, size_t *length)
{
    uint8_t b = s[i];
    if (b < 0x80) {
        *length = 1;
        return ascii_class[b];
    }
    uint32_t c;
    if (b < 0xE0) {
        c = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        *length = 2;
    }
    else if (b < 0xF0) {
        c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        *length = 3;
    }
    else {
        c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12)
            | ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        *length = 4;
    }
    uint8_t cls = self->classes[c];
    return cls != CLASS_UNKNOWN ? cls : look_up_class(self, c);
}

/* Whether an apostrophe at s[i] starts a contraction; its length in bytes, or 0. */
static inline size_t contraction(const uint8_t *s, size_t i, size_t n)
{
    if (i + 1 < n) {
        uint8_t a = s[i + 1] | 0x20;
        if (a == 's' || a == 'd' || a == 'm' || a == 't')
            return 2;
        if (s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) /* U+017F folds to s */
            return 3;
        if (i + 2 < n) {
            uint8_t b = s[i + 2] | 0x20;
            if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e'))
                return 3;
        }
    }
    return 0;
}

#define CLASS_AT(i, length) class_at(self, s, (i), (length))
/* In the functions below, which return an end or -1 with an exception set or -2 to defer the text. */
#define CHECK(cls) do { if ((cls) == CLASS_UNKNOWN) return -1; if ((cls) == CLASS_UNASSIGNED) return -2; } while (0)

/* The end of the run of at most `most` characters of the classes in `set` from s[i]. */
static inline Py_ssize_t run_end(Counter *self, const uint8_t *s, size_t n, size_t i, unsigned set, size_t most)
{
    size_t length;
    for (size_t count = 0; count < most && i < n; count++) {
        uint8_t next = CLASS_AT(i, &length);
        CHECK(next);
        if (!IN(next, set))
            break;
        i += length;
    }
    return (Py_ssize_t)i;
}

/* White space from s[i]: to the end of the text or through its last \r or \n (which first is the
 * pattern's order), or all but its last character when something follows it. */
static inline Py_ssize_t space_end(Counter *self, const uint8_t *s, size_t n, size_t i, int newline_first)
{
    size_t end = i, last = i, newline_end = 0, characters = 0, length;
    while (end < n) {
        uint8_t cls = CLASS_AT(end, &length);
        CHECK(cls);
        if (cls == CLASS_NEWLINE)
            newline_end = end + 1;
        else if (cls != CLASS_SPACE)
            break;
        last = end;
        end += length;
        characters++;
    }
    if (newline_end && (newline_first || end < n))
        return (Py_ssize_t)newline_end;
    if (end == n)
        return (Py_ssize_t)n;
    return (Py_ssize_t)(characters > 1 ? last : end);
}

/* The end of the cl100k_base piece that starts at s[i]: the first alternative that matches there. */
static inline Py_ssize_t cl100k_piece_end(Counter *self, const uint8_t *s, size_t n, size_t i)
{
    size_t first, length;
    uint8_t cls = CLASS_AT(i, &first), next = CLASS_UNKNOWN;
    CHECK(cls);
    if (s[i] == '\'' && (length = contraction(s, i, n)) > 0)
        return (Py_ssize_t)(i + length);
    if (IN(cls, LETTERS))
        return run_end(self, s, n, i, LETTERS, SIZE_MAX);
    if (cls == CLASS_NUMBER)
        return run_end(self, s, n, i, BIT(CLASS_NUMBER), 3);
    if (i + first < n) {
        next = CLASS_AT(i + first, &length);
        CHECK(next);
    }
    /* letters after one character that is no letter, number, \r or \n */
    if (IN(next, LETTERS) && cls != CLASS_NEWLINE)
        return run_end(self, s, n, i + first, LETTERS, SIZE_MAX);
    /* punctuation, symbols and marks, after at most one space, then any \r and \n */
    if (IN(cls, SYMBOLS) || (s[i] == ' ' && IN(next, SYMBOLS))) {
        Py_ssize_t end = run_end(self, s, n, IN(cls, SYMBOLS) ? i : i + 1, SYMBOLS, SIZE_MAX);
        while (end >= 0 && (size_t)end < n && (s[end] == '\r' || s[end] == '\n'))
            end++;
        return end;
    }
    return space_end(self, s, n, i, 0);
}

/* o200k_base's U*W+ (upper_required 0) or U+W* (1) from s[q], as a backtracking matcher matches them:
 * the end, or 0 when they do not match there. */
static inline Py_ssize_t o200k_word(Counter *self, const uint8_t *s, size_t n, size_t q, int upper_required)
{
    size_t i = q, length, lower_end = 0;
    uint8_t cls = CLASS_UNKNOWN;
    while (i < n) {
        cls = CLASS_AT(i, &length);
        CHECK(cls);
        if (!IN(cls, UPPERISH))
            break;
        if (IN(cls, LOWERISH))
            lower_end = i + length;
        i += length;
    }
    if (upper_required && i == q)
        return 0;
    if (i < n && IN(cls, LOWERISH)) /* W after the whole of U */
        return run_end(self, s, n, i, LOWERISH, SIZE_MAX);
    if (upper_required)
        return (Py_ssize_t)i;
    /* U* gives back characters up to the last one that is also in W, which W+ then takes alone */
    return (Py_ssize_t)lower_end;
}

/* The end of the o200k_base piece that starts at s[i]: the first alternative that matches there. */
static inline Py_ssize_t o200k_piece_end(Counter *self, const uint8_t *s, size_t n, size_t i)
{
    size_t first, length;
    uint8_t cls = CLASS_AT(i, &first), next = CLASS_UNKNOWN;
    CHECK(cls);
    int prefix = IN(cls, PREFIXES) && i + first < n;
    for (int upper_required = 0; upper_required < 2; upper_required++) {
        for (int with_prefix = prefix; with_prefix >= 0; with_prefix--) {
            Py_ssize_t end = o200k_word(self, s, n, with_prefix ? i + first : i, upper_required);
            if (end != 0)
                return end > 0 && (size_t)end < n && s[end] == '\'' ? end + (Py_ssize_t)contraction(s, (size_t)end, n)
                                                                      : end;
        }
    }
    if (cls == CLASS_NUMBER)
        return run_end(self, s, n, i, BIT(CLASS_NUMBER), 3);
    if (i + first < n) {
        next = CLASS_AT(i + first, &length);
        CHECK(next);
    }
    /* punctuation, symbols and marks, after at most one space, then any \r, \n and / */
    if (IN(cls, SYMBOLS) || (s[i] == ' ' && IN(next, SYMBOLS))) {
        Py_ssize_t end = run_end(self, s, n, IN(cls, SYMBOLS) ? i : i + 1, SYMBOLS, SIZE_MAX);
        while (end >= 0 && (size_t)end < n && (s[end] == '\r' || s[end] == '\n' || s[end] == '/'))
            end++;
        return end;
    }
    return space_end(self, s, n, i, 1);
}

/* Tokens of UTF-8 text s: -1 with an exception set, -2 when the text must be deferred. */
static Py_ssize_t count_utf8(Counter *self, const uint8_t *s, size_t n)
{
    Py_ssize_t total = 0;
    size_t i = 0;
    while (i < n) {
        Py_ssize_t end = self->pattern == PATTERN_CL100K ? cl100k_piece_end(self, s, n, i)
                                                         : o200k_piece_end(self, s, n, i);
        if (end < 0)
            return end;
        Py_ssize_t tokens = piece_tokens(self, s + i, (size_t)end - i);
        if (tokens < 0)
            return -1;
        total += tokens;
        i = (size_t)end;
    }
    return total;
}

/* ---------------------------------------------------------------- the Python type */

static PyObject *Counter_count(Counter *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "count takes a str, not %.80s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return NULL;
        PyErr_Clear(); /* lone surrogates */
        return PyObject_CallOneArg(self->fallback, text);
    }
    Py_ssize_t tokens = count_utf8(self, (const uint8_t *)s, (size_t)n);
    if (tokens == -2)
        return PyObject_CallOneArg(self->fallback, text);
    if (tokens < 0)
        return NULL;
    return PyLong_FromSsize_t(tokens);
}

static int Counter_init(Counter *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"ranks", "fallback", "encoding", NULL};
    Py_buffer ranks;
    PyObject *fallback;
    const char *encoding = "cl100k_base";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|s:Counter", keywords, &ranks, &fallback, &encoding))
        return -1;
    if (self->slots != NULL) {
        PyBuffer_Release(&ranks);
        PyErr_SetString(PyExc_RuntimeError, "a Counter is initialised once");
        return -1;
    }
    if (strcmp(encoding, "cl100k_base") == 0)
        self->pattern = PATTERN_CL100K;
    else if (strcmp(encoding, "o200k_base") == 0)
        self->pattern = PATTERN_O200K;
    else {
        PyBuffer_Release(&ranks);
        PyErr_Format(PyExc_ValueError, "encoding must be cl100k_base or o200k_base, got %.80s", encoding);
        return -1;
    }
    if (!PyCallable_Check(fallback)) {
        PyBuffer_Release(&ranks);
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return -1;
    }
    int failed = load_ranks(self, ranks.buf, (size_t)ranks.len);
    PyBuffer_Release(&ranks);
    if (failed)
        return -1;
    PyObject *unicodedata = PyImport_ImportModule("unicodedata");
    if (unicodedata == NULL)
        return -1;
    self->category = PyObject_GetAttrString(unicodedata, "category");
    Py_DECREF(unicodedata);
    if (self->category == NULL)
        return -1;
    self->classes = PyMem_Calloc(CODE_POINTS, 1);
    if (self->classes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(fallback);
    self->fallback = fallback;
    return 0;
}

static void Counter_dealloc(Counter *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->category);
    PyMem_Free(self->slots);
    PyMem_Free(self->blob);
    PyMem_Free(self->pair_ranks);
    PyMem_Free(self->classes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Counter_traverse(Counter *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->category);
    return 0;
}

static int Counter_clear(Counter *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->category);
    return 0;
}

static PyObject *Counter_method(Counter *self, PyObject *text)
{
    if (self->slots == NULL || self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the Counter was not initialised");
        return NULL;
    }
    return Counter_count(self, text);
}

static PyMethodDef Counter_methods[] = {
    {"count", (PyCFunction)Counter_method, METH_O,
     "count(text) -> int: tokens of text, special-token markers counted as text."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hermeslab.core._bpecount.Counter",
    .tp_doc = "Counter(ranks: bytes, fallback, encoding='cl100k_base') -- counts tokens of cl100k_base or\n"
              "o200k_base from the bytes of its tiktoken rank file;\n"
              "texts it cannot count exactly (unknown code points, lone surrogates) go to fallback(text).",
    .tp_basicsize = sizeof(Counter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_traverse = (traverseproc)Counter_traverse,
    .tp_clear = (inquiry)Counter_clear,
    .tp_methods = Counter_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "hermeslab.core._bpecount",
    .m_doc = "Exact cl100k_base and o200k_base token counts in C (see hermeslab.core.tokens).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__bpecount(void)
{
    for (int c = 0; c < 128; c++) {
        if (c == '\r' || c == '\n')
            ascii_class[c] = CLASS_NEWLINE;
        else if ((c >= 0x09 && c <= 0x0D) || c == ' ')
            ascii_class[c] = CLASS_SPACE;
        else if (c >= 'a' && c <= 'z')
            ascii_class[c] = CLASS_LOWER;
        else if (c >= 'A' && c <= 'Z')
            ascii_class[c] = CLASS_UPPER;
        else if (c >= '0' && c <= '9')
            ascii_class[c] = CLASS_NUMBER;
        else
            ascii_class[c] = CLASS_OTHER;
    }
    if (PyType_Ready(&CounterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CounterType);
    if (PyModule_AddObject(m, "Counter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(&CounterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
