/* Rows of string chunks copied, in a given order, into one preallocated column.
 *
 * ingest/engine/time_order.py sorts the biggest column of the event table (attrs) slice by slice and
 * drops each parsed chunk once no later slice reads it. With Arrow's take a slice went through
 * three copies (a take per chunk, a concatenation, a take back into slice order); here each row
 * is copied once, straight to its place. Every index and offset is checked against the buffers
 * it points into: a bad one is a ValueError, never a read or write outside them. Fuzzed under
 * AddressSanitizer and UBSan against a plain Python copy by tests/fuzz in make test.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Whether a buffer may be read as an array of `type` (a memoryview can start anywhere). */
#define ALIGNED(p, type) ((uintptr_t)(p) % sizeof(type) == 0)

typedef struct {
    Py_buffer offsets, data;
    int held;
} Chunk;

static void release(Chunk *chunks, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n; k++) {
        if (chunks[k].held) {
            PyBuffer_Release(&chunks[k].offsets);
            PyBuffer_Release(&chunks[k].data);
        }
    }
    PyMem_Free(chunks);
}

static PyObject *take_strings(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out, out_offsets, chunk_of, within;
    Py_ssize_t written;
    PyObject *sources;
    if (!PyArg_ParseTuple(args, "w*w*nO!y*y*", &out, &out_offsets, &written, &PyList_Type, &sources,
                          &chunk_of, &within))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_chunks = PyList_GET_SIZE(sources);
    Py_ssize_t rows = chunk_of.len / (Py_ssize_t)sizeof(int64_t);
    Chunk *chunks = PyMem_Calloc(n_chunks ? n_chunks : 1, sizeof(Chunk));
    if (!chunks) {
        PyErr_NoMemory();
        goto done;
    }
    if (within.len != chunk_of.len || out_offsets.len < rows * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "take_strings: rows, chunk ids and offsets differ in length");
        goto fail;
    }
    if (written < 0 || written > out.len) {
        PyErr_SetString(PyExc_ValueError, "take_strings: written is outside the output");
        goto fail;
    }
    if (!ALIGNED(chunk_of.buf, int64_t) || !ALIGNED(within.buf, int64_t) || !ALIGNED(out_offsets.buf, int32_t)) {
        PyErr_SetString(PyExc_ValueError, "take_strings: an index or offset buffer is not aligned");
        goto fail;
    }
    /* (offsets int32, data) or None: dropped. The list's size is read again each time: it is
     * the caller's and could change while a buffer is asked for. */
    for (Py_ssize_t k = 0; k < n_chunks && k < PyList_GET_SIZE(sources); k++) {
        PyObject *item = PyList_GET_ITEM(sources, k);
        if (item == Py_None) continue;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "take_strings: a source is (offsets, data) or None");
            goto fail;
        }
        Py_INCREF(item);
        int got = PyObject_GetBuffer(PyTuple_GET_ITEM(item, 0), &chunks[k].offsets, PyBUF_SIMPLE);
        if (got == 0 && PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &chunks[k].data, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&chunks[k].offsets);
            got = -1;
        }
        Py_DECREF(item);
        if (got < 0) goto fail;
        chunks[k].held = 1;
        if (!ALIGNED(chunks[k].offsets.buf, int32_t)) {
            PyErr_SetString(PyExc_ValueError, "take_strings: an offset buffer is not aligned");
            goto fail;
        }
    }
    const int64_t *of = chunk_of.buf, *at = within.buf;
    int32_t *ends = out_offsets.buf;
    char *dst = out.buf;
    const char *bad = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t k = of[i], r = at[i];
        if (k < 0 || k >= n_chunks || !chunks[k].held) { bad = "a row of a dropped or missing chunk"; break; }
        const int32_t *off = chunks[k].offsets.buf;
        Py_ssize_t n_off = chunks[k].offsets.len / (Py_ssize_t)sizeof(int32_t);
        if (r < 0 || r >= n_off - 1) { bad = "a row past its chunk"; break; }
        int32_t a = off[r], b = off[r + 1];
        if (a < 0 || b < a || b > chunks[k].data.len) { bad = "offsets outside their data"; break; }
        if (written + (b - a) > out.len || written + (b - a) > INT32_MAX) { bad = "more text than the output holds"; break; }
        /* memmove: a caller may hand the output in as a source too */
        memmove(dst + written, (const char *)chunks[k].data.buf + a, (size_t)(b - a));
        written += b - a;
        ends[i] = (int32_t)written;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_Format(PyExc_ValueError, "take_strings: %s", bad);
        goto fail;
    }
    result = PyLong_FromSsize_t(written);
fail:
    release(chunks, n_chunks);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&out_offsets);
    PyBuffer_Release(&chunk_of);
    PyBuffer_Release(&within);
    return result;
}

static PyMethodDef METHODS[] = {
    {"take_strings", take_strings, METH_VARARGS,
     "take_strings(out, out_ends, written, sources, chunk_of, within) -> written: row i (row "
     "within[i] of sources[chunk_of[i]], a (int32 offsets, data) pair) appended to out; "
     "out_ends[i] its end."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_gather", NULL, -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__gather(void) { return PyModule_Create(&MODULE); }
