/* One window of Kineto `traceEvents` (`[` event, ... `]`) to text columns, with no Python
 * object per event or field.
 *
 * The scanner validates the whole window as strict JSON and records, per event, the raw text
 * of the few keys the event table needs (top level: ph, cat, name, pid, tid, ts, dur, args;
 * inside an `args` object: the keys that feed columns) and a type tag for each; the integers
 * of pid, tid and the args keys it parses too (before the outputs are cut to size: a cut may
 * move them). Python turns the texts into columns with Arrow (ts and dur are parsed there)
 * and decodes the rare values it cannot take as they are (escaped strings, odd types,
 * integers beyond int64) with msgspec.
 *
 * Public C API only (bytearrays, cut with PyByteArray_Resize); built with AddressSanitizer,
 * UBSan and libFuzzer's coverage by tests/fuzz, which fuzzes it against msgspec in make test.
 *
 * It is a fast path, never the judge: anything it is not sure msgspec would read the same
 * way (an event that is not an object, a key that is repeated or escaped, a \u escape of a
 * surrogate, nesting deeper than MAX_DEPTH, text after the array) makes it return None, and
 * the caller decodes the window with msgspec as before. It is at least as strict as msgspec
 * on the grammar, so a window it accepts is one msgspec accepts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { T_ABSENT = 0, T_NULL, T_STR, T_ESC, T_INT, T_FLOAT, T_BOOL, T_OBJ, T_ARR };

#define MAX_DEPTH 200  /* below msgspec's recursion limit: deeper windows go to msgspec */

static const char *TOP_KEYS[] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"};
#define N_TOP 8
#define ARGS_KEY 7
static const char *ARG_KEYS[] = {"correlation", "device", "stream", "External id",
                                 "Bytes", "Device Id", "Device Type"};
#define N_ARG 7
#define N_KEYS (N_TOP + N_ARG)
#define N_OUT (3 * N_KEYS + 2)  /* tags, offsets, data per key; spans; long_digits */
/* The keys whose integers are parsed here too (pid, tid and the args keys): int64 per event
 * and whether it is exact, so Python casts no text for them. */
#define PID_KEY 3
#define TID_KEY 4
#define IS_INT_KEY(k) ((k) == PID_KEY || (k) == TID_KEY || (k) >= N_TOP)

/* A window's output, allocated for the most it could hold (untouched pages cost nothing):
 * no bound checks while scanning. A text is never longer than the window, and an event
 * (`{}` and a `,`) takes at least 3 bytes of it. */
typedef struct {
    unsigned char *tags;  /* one type tag per event */
    int32_t *offsets;     /* events + 1 */
    char *data;           /* the texts, back to back */
    size_t len;
} Column;

typedef struct {       /* where one key's value is in the current event */
    int tag;
    size_t start, end; /* the text kept: a string's inside, anything else whole */
} Slot;

typedef struct {
    const unsigned char *s;
    size_t n, pos;
    int failed;        /* 1: not for the fast path; 2: out of memory */
    Slot slots[N_KEYS];
    Column cols[N_KEYS];
    int64_t *spans;       /* [start, end) of each event */
    unsigned char *long_digits;  /* 1: the event's args text holds a run of LONG_RUN+ digits */
    Py_ssize_t events;
    PyObject *owners[N_OUT];     /* the bytearrays those buffers are: handed over as they are */
} Scanner;

static size_t TOP_LEN[N_TOP], ARG_LEN[N_ARG];

/* bytes that end a plain run inside a string: `"`, `\` and control characters */
static unsigned char STOP[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) STOP[c] = (c < 0x20 || c == '"' || c == '\\');
    for (int k = 0; k < N_TOP; k++) TOP_LEN[k] = strlen(TOP_KEYS[k]);
    for (int k = 0; k < N_ARG; k++) ARG_LEN[k] = strlen(ARG_KEYS[k]);
}

static inline void skip_ws(Scanner *z) {
    const unsigned char *s = z->s;
    size_t i = z->pos, n = z->n;
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    z->pos = i;
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* At a `"`: to just past the closing quote. Returns T_STR, T_ESC (has escapes) or -1. */
static int scan_string(Scanner *z) {
    const unsigned char *s = z->s;
    size_t i = z->pos + 1, n = z->n;
    int tag = T_STR;
    for (;;) {
        while (i < n && !STOP[s[i]]) i++;
        if (i >= n) return -1;
        unsigned char c = s[i];
        if (c == '"') break;
        if (c < 0x20) return -1;  /* a raw control character: invalid JSON */
        /* a backslash */
        if (i + 1 >= n) return -1;
        unsigned char e = s[i + 1];
        tag = T_ESC;
        if (e == 'u') {
            if (i + 5 >= n) return -1;
            int v = 0;
            for (int k = 2; k < 6; k++) {
                int h = hexval(s[i + k]);
                if (h < 0) return -1;
                v = v * 16 + h;
            }
            if (v >= 0xD800 && v <= 0xDFFF) return -1;  /* surrogates: msgspec decides */
            i += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
            i += 2;
        } else {
            return -1;
        }
    }
    z->pos = i + 1;
    return tag;
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(Scanner *z) {
    const unsigned char *s = z->s;
    size_t i = z->pos, n = z->n;
    int tag = T_INT;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return -1;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return -1;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return -1;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        tag = T_FLOAT;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return -1;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        tag = T_FLOAT;
    }
    z->pos = i;
    return tag;
}

static int scan_literal(Scanner *z, const char *word, size_t len, int tag) {
    if (z->n - z->pos < len || memcmp(z->s + z->pos, word, len) != 0) return -1;
    z->pos += len;
    return tag;
}

/* After a member or an element: 1 past a `,`, 0 past `close`, -1 at anything else. */
static inline int next_item(Scanner *z, unsigned char close) {
    skip_ws(z);
    if (z->pos >= z->n) return -1;
    unsigned char c = z->s[z->pos++];
    if (c == ',') {
        skip_ws(z);
        return 1;
    }
    return c == close ? 0 : -1;
}

static int scan_value(Scanner *z, int depth);

/* At `{` or `[`: the whole container. keys: the keys recorded (NULL: none); first: their slot. */
static int scan_object(Scanner *z, int depth, const char **keys, const size_t *lens, int nkeys,
                       int first) {
    if (depth > MAX_DEPTH) return -1;
    z->pos++;  /* `{` */
    skip_ws(z);
    if (z->pos < z->n && z->s[z->pos] == '}') {
        z->pos++;
        return T_OBJ;
    }
    for (;;) {
        if (z->pos >= z->n || z->s[z->pos] != '"') return -1;
        size_t kstart = z->pos + 1;
        int ktag = scan_string(z);
        if (ktag < 0) return -1;
        size_t klen = z->pos - 1 - kstart;
        int slot = -1;
        if (keys) {
            if (ktag == T_ESC) return -1;  /* an escaped key may spell a known one */
            for (int k = 0; k < nkeys; k++) {
                if (lens[k] == klen && z->s[kstart] == (unsigned char)keys[k][0] &&
                    memcmp(z->s + kstart, keys[k], klen) == 0) {
                    slot = first + k;
                    break;
                }
            }
        }
        skip_ws(z);
        if (z->pos >= z->n || z->s[z->pos] != ':') return -1;
        z->pos++;
        skip_ws(z);
        size_t vstart = z->pos;
        int vtag;
        if (slot == first + ARGS_KEY && first == 0 && z->pos < z->n && z->s[z->pos] == '{') {
            vtag = scan_object(z, depth + 1, ARG_KEYS, ARG_LEN, N_ARG, N_TOP);  /* args: its keys too */
        } else {
            vtag = scan_value(z, depth + 1);
        }
        if (vtag < 0) return -1;
        if (slot >= 0) {
            Slot *sl = &z->slots[slot];
            if (sl->tag != T_ABSENT) return -1;  /* repeated: msgspec keeps the last */
            sl->tag = vtag;
            int inside = (vtag == T_STR || vtag == T_ESC) && slot != ARGS_KEY;
            sl->start = vstart + inside;
            sl->end = z->pos - inside;
        }
        int more = next_item(z, '}');
        if (more <= 0) return more < 0 ? -1 : T_OBJ;
    }
}

static int scan_array(Scanner *z, int depth) {
    if (depth > MAX_DEPTH) return -1;
    z->pos++;  /* `[` */
    skip_ws(z);
    if (z->pos < z->n && z->s[z->pos] == ']') {
        z->pos++;
        return T_ARR;
    }
    for (;;) {
        if (scan_value(z, depth + 1) < 0) return -1;
        int more = next_item(z, ']');
        if (more <= 0) return more < 0 ? -1 : T_ARR;
    }
}

static int scan_value(Scanner *z, int depth) {
    if (z->pos >= z->n) return -1;
    switch (z->s[z->pos]) {
        case '"': return scan_string(z);
        case '{': return scan_object(z, depth, NULL, NULL, 0, 0);
        case '[': return scan_array(z, depth);
        case 't': return scan_literal(z, "true", 4, T_BOOL);
        case 'f': return scan_literal(z, "false", 5, T_BOOL);
        case 'n': return scan_literal(z, "null", 4, T_NULL);
        default: return scan_number(z);
    }
}

/* Digits in a row that may spell an integer beyond int64 (19 digits reach 10^18), not after
 * a `.` (a fraction): the rows Python checks exactly (kinds.has_big_int), in or out of strings. */
#define LONG_RUN 19

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Every run of LONG_RUN digits covers one of the positions sampled LONG_RUN apart: only the
 * runs around a sampled digit are measured (a tenth of the bytes looked at, not all). */
static int has_long_digits(const unsigned char *s, size_t n) {
    for (size_t j = LONG_RUN - 1; j < n; j += LONG_RUN) {
        if (!is_digit(s[j])) continue;
        size_t a = j, b = j;
        while (a > 0 && is_digit(s[a - 1])) a--;
        while (b + 1 < n && is_digit(s[b + 1])) b++;
        if (b - a + 1 >= LONG_RUN && (a == 0 || s[a - 1] != '.')) return 1;
        j = b;  /* the next run starts past b: sampling from b + LONG_RUN still covers it */
    }
    return 0;
}

/* The current event's slots appended to the columns. */
static inline void flush_event(Scanner *z) {
    Py_ssize_t i = z->events;
    Slot *args = &z->slots[ARGS_KEY];
    z->long_digits[i] = args->tag != T_ABSENT && has_long_digits(z->s + args->start, args->end - args->start);
    for (int k = 0; k < N_KEYS; k++) {
        Slot *sl = &z->slots[k];
        Column *c = &z->cols[k];
        c->tags[i] = (unsigned char)sl->tag;
        if (sl->tag != T_ABSENT && (sl->tag != T_NULL || k == ARGS_KEY)) {  /* args: as written */
            memcpy(c->data + c->len, z->s + sl->start, sl->end - sl->start);
            c->len += sl->end - sl->start;
        }
        c->offsets[i + 1] = (int32_t)c->len;
    }
}

static void free_output(Scanner *z) {
    for (int k = 0; k < N_OUT; k++) Py_CLEAR(z->owners[k]);
}

/* A bytearray of `size` for output `slot`, written in place while the GIL is released and
 * cut to what was written at the end (`finish_output`): no copy of the output (untouched pages
 * cost nothing). */
static char *new_output(Scanner *z, int slot, size_t size) {
    z->owners[slot] = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(size ? size : 1));
    return z->owners[slot] ? PyByteArray_AS_STRING(z->owners[slot]) : NULL;
}

static int alloc_output(Scanner *z) {
    size_t most = z->n / 3 + 1;
    z->spans = (int64_t *)new_output(z, 3 * N_KEYS, most * 2 * sizeof(int64_t));
    z->long_digits = (unsigned char *)new_output(z, 3 * N_KEYS + 1, most);
    if (!z->spans || !z->long_digits) return -1;
    for (int k = 0; k < N_KEYS; k++) {
        Column *c = &z->cols[k];
        c->tags = (unsigned char *)new_output(z, 3 * k, most);
        c->offsets = (int32_t *)new_output(z, 3 * k + 1, (most + 1) * sizeof(int32_t));
        c->data = new_output(z, 3 * k + 2, z->n);
        if (!c->tags || !c->offsets || !c->data) return -1;
        c->offsets[0] = 0;
    }
    return 0;
}

/* The outputs cut to the bytes written. A resize may move a buffer: every pointer into the
 * outputs is dropped first, so nothing reads them after this (the integers are parsed before). */
static int finish_output(Scanner *z) {
    Py_ssize_t n = z->events;
    z->spans = NULL;
    z->long_digits = NULL;
    for (int k = 0; k < N_KEYS; k++) {
        Column *c = &z->cols[k];
        Py_ssize_t used[3] = {n, (n + 1) * (Py_ssize_t)sizeof(int32_t), (Py_ssize_t)c->len};
        c->tags = NULL;
        c->offsets = NULL;
        c->data = NULL;
        for (int j = 0; j < 3; j++)
            if (PyByteArray_Resize(z->owners[3 * k + j], used[j]) < 0) return -1;
    }
    if (PyByteArray_Resize(z->owners[3 * N_KEYS], n * 2 * (Py_ssize_t)sizeof(int64_t)) < 0) return -1;
    return PyByteArray_Resize(z->owners[3 * N_KEYS + 1], n);
}

/* A JSON integer's text (the grammar is checked) as int64; 0 when it is beyond int64. */
static int parse_int64(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = n > 0 && s[0] == '-';
    i += neg;
    if (i >= n) return 0;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9 || v > (limit - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;  /* -(2^63) without overflow */
    return 1;
}

/* One key's integers: -1 and exact where absent or null, the value and exact where an
 * integer within int64, -1 and not exact for anything else (Python decodes those). */
static void parse_ints(const Column *c, Py_ssize_t n, int64_t *values, unsigned char *exact) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int tag = c->tags[i];
        values[i] = -1;
        exact[i] = tag == T_ABSENT || tag == T_NULL ||
                   (tag == T_INT && parse_int64(c->data + c->offsets[i], (size_t)(c->offsets[i + 1] - c->offsets[i]),
                                                &values[i]));
    }
}

/* The whole window: 0 ok, -1 not for the fast path. */
static int scan_window(Scanner *z) {
    skip_ws(z);
    if (z->pos >= z->n || z->s[z->pos] != '[') return -1;
    z->pos++;
    skip_ws(z);
    if (z->pos < z->n && z->s[z->pos] == ']') {
        z->pos++;
    } else {
        for (;;) {
            if (z->pos >= z->n || z->s[z->pos] != '{') return -1;  /* not an event object */
            size_t start = z->pos;
            memset(z->slots, 0, sizeof z->slots);
            if (scan_object(z, 1, TOP_KEYS, TOP_LEN, N_TOP, 0) < 0) return -1;
            z->spans[2 * z->events] = (int64_t)start;
            z->spans[2 * z->events + 1] = (int64_t)z->pos;
            flush_event(z);
            z->events++;
            int more = next_item(z, ']');
            if (more < 0) return -1;
            if (more == 0) break;
        }
    }
    skip_ws(z);
    return z->pos == z->n ? 0 : -1;  /* trailing text: msgspec says where the array ended */
}

/* Per key: (int64 values, exact flags) as bytes for the integer keys, None for the others. */
static PyObject *scan_numbers(Scanner *z) {
    Py_ssize_t n = z->events;
    PyObject *numbers = PyTuple_New(N_KEYS);
    if (!numbers) return NULL;
    int64_t *values[N_KEYS] = {0};
    unsigned char *exact[N_KEYS] = {0};
    for (int k = 0; k < N_KEYS; k++) {
        if (!IS_INT_KEY(k)) {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(numbers, k, Py_None);
            continue;
        }
        PyObject *pair = PyTuple_New(2);
        if (!pair) {
            Py_DECREF(numbers);
            return NULL;
        }
        PyTuple_SET_ITEM(numbers, k, pair);
        PyObject *v = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
        PyTuple_SET_ITEM(pair, 0, v);  /* the tuple owns it (NULL: cleared with the tuple) */
        PyObject *e = PyBytes_FromStringAndSize(NULL, n);
        PyTuple_SET_ITEM(pair, 1, e);
        if (!v || !e) {
            Py_DECREF(numbers);
            return NULL;
        }
        values[k] = (int64_t *)PyBytes_AS_STRING(v);
        exact[k] = (unsigned char *)PyBytes_AS_STRING(e);
    }
    Py_BEGIN_ALLOW_THREADS
    for (int k = 0; k < N_KEYS; k++)
        if (values[k]) parse_ints(&z->cols[k], n, values[k], exact[k]);
    Py_END_ALLOW_THREADS
    return numbers;
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len > INT32_MAX) {  /* int32 offsets; windows are a few MiB */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    Scanner *z = PyMem_Calloc(1, sizeof(Scanner));
    if (!z) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    z->s = view.buf;
    z->n = (size_t)view.len;
    PyObject *out = NULL, *columns = NULL, *numbers = NULL;
    if (alloc_output(z) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int scanned;
    Py_BEGIN_ALLOW_THREADS
    scanned = scan_window(z) == 0;
    Py_END_ALLOW_THREADS
    if (!scanned) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    /* the integers first: they are read from the outputs, which finish_output may move */
    if (!(numbers = scan_numbers(z))) goto done;
    if (finish_output(z) < 0) goto done;
    columns = PyTuple_New(N_KEYS);
    if (!columns) goto done;
    for (int k = 0; k < N_KEYS; k++) {
        PyObject *one = PyTuple_Pack(3, z->owners[3 * k], z->owners[3 * k + 1], z->owners[3 * k + 2]);
        if (!one) goto done;
        PyTuple_SET_ITEM(columns, k, one);
    }
    out = Py_BuildValue("(nOOOO)", z->events, z->owners[3 * N_KEYS], columns, z->owners[3 * N_KEYS + 1], numbers);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(columns);
    Py_XDECREF(numbers);
    free_output(z);
    PyMem_Free(z);
    return out;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_O,
     "scan(window) -> (events, spans, columns, long_digits, numbers) or None: the texts of the "
     "keys the event table needs, and the integers of pid, tid and the args keys; None when the "
     "window must be decoded with msgspec."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) {
    init_tables();
    PyObject *m = PyModule_Create(&MODULE);
    if (!m) return NULL;
    PyObject *keys = PyTuple_New(N_KEYS);
    if (!keys) goto fail;
    for (int k = 0; k < N_KEYS; k++) {
        PyObject *key = PyUnicode_FromString(k < N_TOP ? TOP_KEYS[k] : ARG_KEYS[k - N_TOP]);
        if (!key) goto fail;
        PyTuple_SET_ITEM(keys, k, key);
    }
    int added = PyModule_AddObjectRef(m, "KEYS", keys);
    Py_DECREF(keys);
    if (added < 0) goto fail_module;
    return m;
fail:
    Py_XDECREF(keys);
fail_module:
    Py_DECREF(m);
    return NULL;
}
