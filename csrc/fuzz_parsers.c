/* Generated-input fuzz of the cgcore parsers, meant to run under ASan/UBSan (sanitize.sh).
 *
 *   fuzz_parsers [ITERATIONS] [SEED]
 *
 * A deterministic xorshift PRNG builds hostile buffers (token soup of digits, "max", "-1",
 * keys, spaces, newlines, NUL and random bytes, sometimes very long) in exactly-sized heap
 * blocks, so a read one byte past the end is an ASan report. Also checks the parsers' own
 * invariants. Exit status 1 on a broken invariant; sanitizer reports abort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgcore.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static const char *const TOKENS[] = {
    "max", "-1", "0", "7", "18446744073709551615", "18446744073709551616",
    "99999999999999999999999999", " ", "\n", "\n\n", "usage_usec", "user_usec", "anon", "-",
    "max ", "00000000000000000000000000001", "\r", "\t",
};
static const char *const KEYS[] = {"usage_usec", "user_usec", "anon", "file", "x"};
static const uint32_t KEYLENS[] = {10, 9, 4, 4, 1};
/* repeated keys take the parser's general path */
static const char *const DUPKEYS[] = {"anon", "x", "anon"};
static const uint32_t DUPLENS[] = {4, 1, 4};

static size_t generate(char *buf, size_t cap)
{
    size_t n = 0, target = (next() % 8 == 0) ? next() % cap : next() % 96;

    while (n < target) {
        uint64_t r = next() % 10;
        if (r < 5) {
            const char *t = TOKENS[next() % (sizeof TOKENS / sizeof *TOKENS)];
            size_t l = strlen(t);
            if (n + l > target)
                break;
            memcpy(buf + n, t, l);
            n += l;
        } else if (r < 7) {
            buf[n++] = (char)('0' + next() % 10);
        } else if (r < 8) {
            buf[n++] = '\0';
        } else {
            buf[n++] = (char)(next() & 0xff);
        }
    }
    return n;
}

static int check_cells(const cg_spec *spec, const uint64_t *v, const uint8_t *st)
{
    for (int k = 0; k < spec->ncells; k++) {
        if (st[k] > CG_EIO)
            return 0;
        if (st[k] != CG_OK && v[k] != 0)
            return 0;
        if (spec->kind != CG_KEYED && st[k] == CG_EMISSING_KEY)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 200000;
    static char scratch[70000];
    uint64_t vals[8];
    uint8_t st[8];
    cg_spec specs[] = {
        {"memory.max", CG_SINGLE, 1, NULL, NULL},
        {"cpu.max", CG_FIELDS, 2, NULL, NULL},
        {"x", CG_FIELDS, 5, NULL, NULL},
        {"cpu.stat", CG_KEYED, 5, KEYS, KEYLENS},
        {"memory.stat", CG_KEYED, 2, KEYS + 2, KEYLENS + 2},
        {"dup.stat", CG_KEYED, 3, DUPKEYS, DUPLENS},
    };
    int nspecs = (int)(sizeof specs / sizeof *specs);

    if (argc > 2)
        rng_state = strtoull(argv[2], NULL, 0) | 1;
    for (long i = 0; i < iterations; i++) {
        size_t n = generate(scratch, sizeof scratch);
        char *buf = malloc(n ? n : 1); /* exact size: ASan catches any overread */
        if (!buf)
            return 1;
        memcpy(buf, scratch, n);
        for (int s = 0; s < nspecs; s++) {
            memset(vals, 0xa5, sizeof vals);
            cg_parse(&specs[s], buf, n, vals, st);
            if (!check_cells(&specs[s], vals, st)) {
                fprintf(stderr, "fuzz: invariant broken at iteration %ld spec %d\n", i, s);
                return 1;
            }
        }
        uint64_t tv;
        int ts = cg_parse_token(buf, n, &tv);
        if (ts == CG_OK) { /* OK means all digits */
            for (size_t j = 0; j < n; j++)
                if (buf[j] < '0' || buf[j] > '9')
                    return 1;
        }
        free(buf);
    }
    printf("fuzz_parsers: %ld inputs, no findings\n", iterations);
    return 0;
}
