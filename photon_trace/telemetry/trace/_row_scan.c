/* One row section of a chunk line, [[f,..,f],..], read in one pass into column buffers.
 *
 * The numpy reader (row_scan.py) makes a dozen passes over each line's bytes; this makes one,
 * without the GIL, so the loader's two scan threads run at once (scan_ahead.py). It accepts
 * exactly what row_scan.py proves plain and nothing more: rows of the given width with nothing
 * between their separators, integers -?(0|[1-9][0-9]*) of at most 18 digits, true/false, and
 * strings without a backslash or a control character. Anything else returns None and the
 * caller reads the line another way, so what loads, and every error, stays the JSON parser's.
 * Strings are coded in order of first appearance (a hash table per field); their UTF-8 is
 * checked by the caller, once per distinct string.
 *
 * scan_rows(line, at, kinds, cap, ints, flags, codes) -> (end, rows, distinct) or None
 *   line   bytes; at: the index of the section's '['
 *   kinds  str of 'i' (int), 'b' (bool), 's' (str), one per field
 *   cap    the most rows the buffers hold (field k of its kind at [k * cap + row])
 *   ints   int64 buffer, flags uint8 buffer, codes int32 buffer (writable, C-contiguous)
 *   end    the index after the section's ']'; distinct: per str field, [(offset, length), ..]
 *
 * Built by `pip install -e .` (pyproject.toml's ext-modules) into this folder; after an edit here,
 * run it again: the loader imports whatever was built last.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 18
#define MAX_DISTINCT (1 << 16)   /* more distinct strings in one field of one line: not ours to read */

typedef struct {
    Py_ssize_t off, len;
    uint64_t hash;
    int32_t code;                /* -1: empty */
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    int32_t n;
} Table;

static int table_init(Table *t) {
    t->mask = 63;
    t->n = 0;
    t->slots = malloc((t->mask + 1) * sizeof(Slot));
    if (t->slots == NULL)
        return 0;
    for (size_t j = 0; j <= t->mask; j++)
        t->slots[j].code = -1;
    return 1;
}

static int table_grow(Table *t) {
    size_t mask = t->mask * 2 + 1;
    Slot *slots = malloc((mask + 1) * sizeof(Slot));
    if (slots == NULL)
        return 0;
    for (size_t j = 0; j <= mask; j++)
        slots[j].code = -1;
    for (size_t j = 0; j <= t->mask; j++) {
        if (t->slots[j].code < 0)
            continue;
        size_t k = t->slots[j].hash & mask;
        while (slots[k].code >= 0)
            k = (k + 1) & mask;
        slots[k] = t->slots[j];
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 1;
}

/* The code of the string b[off, off + len), a new one when it is first seen; -1 past the limit. */
static int32_t table_code(Table *t, const unsigned char *b, Py_ssize_t off, Py_ssize_t len, uint64_t hash) {
    size_t k = hash & t->mask;
    for (;;) {
        Slot *s = &t->slots[k];
        if (s->code < 0)
            break;
        if (s->hash == hash && s->len == len && memcmp(b + s->off, b + off, (size_t)len) == 0)
            return s->code;
        k = (k + 1) & t->mask;
    }
    if (t->n >= MAX_DISTINCT)
        return -1;
    if ((size_t)(t->n + 1) * 2 > t->mask + 1) {     /* kept at most half full */
        if (!table_grow(t))
            return -1;
        k = hash & t->mask;
        while (t->slots[k].code >= 0)
            k = (k + 1) & t->mask;
    }
    Slot *s = &t->slots[k];
    s->off = off;
    s->len = len;
    s->hash = hash;
    s->code = t->n;
    return t->n++;
}

typedef struct {
    const unsigned char *b;
    Py_ssize_t n;
    const char *kinds;
    Py_ssize_t width, cap;
    int64_t *ints;
    uint8_t *flags;
    int32_t *codes;
    Table *tables;
} Scan;

/* The section at b[i] == '['; on success its rows and the index after its ']'. */
static int scan(const Scan *sc, Py_ssize_t i, Py_ssize_t *rows_out, Py_ssize_t *end_out) {
    const unsigned char *b = sc->b;
    const Py_ssize_t n = sc->n, cap = sc->cap;
    if (i >= n || b[i] != '[')
        return 0;
    i++;
    if (i < n && b[i] == ']') {
        *rows_out = 0;
        *end_out = i + 1;
        return 1;
    }
    Py_ssize_t r = 0;
    for (;;) {
        if (r >= cap || i >= n || b[i] != '[')
            return 0;
        i++;
        Py_ssize_t ki = 0, kb = 0, ks = 0;
        for (Py_ssize_t f = 0; f < sc->width; f++) {
            if (f) {
                if (i >= n || b[i] != ',')
                    return 0;
                i++;
            }
            switch (sc->kinds[f]) {
            case 'i': {
                int neg = i < n && b[i] == '-';
                i += neg;
                Py_ssize_t s = i;
                uint64_t v = 0;
                while (i < n && (unsigned)(b[i] - '0') <= 9 && i - s < MAX_DIGITS + 1) {
                    v = v * 10 + (uint64_t)(b[i] - '0');
                    i++;
                }
                Py_ssize_t digits = i - s;
                if (digits < 1 || digits > MAX_DIGITS || (b[s] == '0' && digits > 1))
                    return 0;
                sc->ints[ki++ * cap + r] = neg ? -(int64_t)v : (int64_t)v;
                break;
            }
            case 'b':
                if (i + 4 <= n && memcmp(b + i, "true", 4) == 0) {
                    sc->flags[kb++ * cap + r] = 1;
                    i += 4;
                } else if (i + 5 <= n && memcmp(b + i, "false", 5) == 0) {
                    sc->flags[kb++ * cap + r] = 0;
                    i += 5;
                } else {
                    return 0;
                }
                break;
            case 's': {
                if (i >= n || b[i] != '"')
                    return 0;
                Py_ssize_t s = ++i;
                uint64_t h = 14695981039346656037ULL;      /* FNV-1a */
                while (i < n && b[i] != '"') {
                    if (b[i] < 0x20 || b[i] == '\\')
                        return 0;
                    h = (h ^ b[i]) * 1099511628211ULL;
                    i++;
                }
                if (i >= n)
                    return 0;
                int32_t code = table_code(&sc->tables[ks], b, s, i - s, h);
                if (code < 0)
                    return 0;
                sc->codes[ks++ * cap + r] = code;
                i++;
                break;
            }
            default:
                return 0;
            }
        }
        if (i >= n || b[i] != ']')
            return 0;
        i++;
        r++;
        if (i < n && b[i] == ',') {
            i++;
            continue;
        }
        if (i < n && b[i] == ']') {
            *rows_out = r;
            *end_out = i + 1;
            return 1;
        }
        return 0;
    }
}

static PyObject *distinct_list(const Table *t) {
    PyObject *out = PyList_New(t->n);
    if (out == NULL)
        return NULL;
    for (size_t j = 0; j <= t->mask; j++) {
        const Slot *s = &t->slots[j];
        if (s->code < 0)
            continue;
        PyObject *pair = Py_BuildValue("(nn)", s->off, s->len);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, s->code, pair);
    }
    return out;
}

static int big_enough(const Py_buffer *buf, Py_ssize_t fields, Py_ssize_t cap, Py_ssize_t item) {
    return buf->len >= fields * cap * item;
}

static PyObject *scan_rows(PyObject *self, PyObject *args) {
    Py_buffer line, ints, flags, codes;
    Py_ssize_t at, cap, width;
    const char *kinds;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*ns#nw*w*w*", &line, &at, &kinds, &width, &cap, &ints, &flags, &codes))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t ni = 0, nb = 0, ns = 0;
    for (Py_ssize_t f = 0; f < width; f++) {
        ni += kinds[f] == 'i';
        nb += kinds[f] == 'b';
        ns += kinds[f] == 's';
    }
    Table *tables = NULL;
    Py_ssize_t ready = 0;
    if (at < 0 || cap < 0 || ni + nb + ns != width || !big_enough(&ints, ni, cap, 8)
        || !big_enough(&flags, nb, cap, 1) || !big_enough(&codes, ns, cap, 4)) {
        PyErr_SetString(PyExc_ValueError, "scan_rows: bad kinds or buffers too small for cap rows");
        goto done;
    }
    tables = calloc(ns ? (size_t)ns : 1, sizeof(Table));
    if (tables == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; ready < ns; ready++) {
        if (!table_init(&tables[ready])) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Scan sc = {line.buf, line.len, kinds, width, cap, ints.buf, flags.buf, codes.buf, tables};
    Py_ssize_t rows = 0, end = 0;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = scan(&sc, at, &rows, &end);
    Py_END_ALLOW_THREADS
    if (!ok) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *distinct = PyList_New(ns);
    if (distinct == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < ns; k++) {
        PyObject *one = distinct_list(&tables[k]);
        if (one == NULL) {
            Py_DECREF(distinct);
            goto done;
        }
        PyList_SET_ITEM(distinct, k, one);
    }
    result = Py_BuildValue("(nnN)", end, rows, distinct);
done:
    for (Py_ssize_t k = 0; k < ready; k++)
        free(tables[k].slots);
    free(tables);
    PyBuffer_Release(&line);
    PyBuffer_Release(&ints);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&codes);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_rows", scan_rows, METH_VARARGS, "One row section of a chunk line into column buffers (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_row_scan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__row_scan(void) {
    return PyModule_Create(&module);
}
