# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled fast path of :func:`trace_report.formats.kineto.decode_piece` (optional extension).

:func:`scan_events` reads one piece (a JSON array of Trace Event Format objects) in a single
pass of C over its bytes and returns the columns that the msgspec decoder would build, as raw
buffers: no Python object per event. It validates the whole piece against the JSON grammar
(RFC 8259) as it goes. Whenever the piece holds anything the common case does not (an entry that
is not an object, a string with an escape in a field it reads, a key given twice, a float or a
string where an integer id is expected, numbers out of range, nesting deeper than 64, invalid
JSON), it returns None and the caller decodes the piece with msgspec instead, which gives the
same columns or the exact error. So this module only ever decides *how fast*, never *what*.

Fields read (Trace Event Format; Kineto spellings, ``../shared/FORMATS.md``): ``ph``, ``cat``,
``name``, ``pid``, ``tid``, ``ts``, ``dur``, ``args`` and, inside ``args``, ``correlation``,
``External id`` (2020/2021: ``external id``), ``stream``, ``device``.
"""

from libc.math cimport isinf
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, realloc, strtod
from libc.string cimport memcmp, memcpy, memset
from cpython.buffer cimport PyBuffer_FillInfo

cdef extern from *:
    """
    /* Index (0-7) of the lowest byte of a nonzero word whose top bit is set: how far the first
       stop byte lies into an 8-byte word loaded with memcpy. 0 where the byte order or the
       compiler is not known: the byte loop after it then finds the stop. */
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define TR_FIRST_FLAGGED_BYTE(m) (__builtin_ctzll(m) >> 3)
    #else
    #define TR_FIRST_FLAGGED_BYTE(m) 0
    #endif

    /* Index of the first byte at or after i that is a quote, a backslash or below 0x20, looking
       16 bytes at a time with SSE2 (every x86-64 CPU has it); where no whole 16-byte block left
       holds one, the index of the first byte not looked at (the caller goes on from there). */
    #if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    #include <emmintrin.h>
    static inline Py_ssize_t TR_SKIP_PLAIN(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) {
        const __m128i quote = _mm_set1_epi8(0x22), backslash = _mm_set1_epi8(0x5C), below = _mm_set1_epi8(0x1F);
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i*)(p + i));
            __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                        _mm_cmpeq_epi8(_mm_min_epu8(v, below), v));
            int mask = _mm_movemask_epi8(stop);
            if (mask)
                return i + __builtin_ctz((unsigned)mask);
            i += 16;
        }
        return i;
    }
    #else
    #define TR_SKIP_PLAIN(p, i, n) (i)
    #endif
    """
    int TR_FIRST_FLAGGED_BYTE(unsigned long long m) noexcept nogil
    Py_ssize_t TR_SKIP_PLAIN(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil

cdef enum:
    MAX_DEPTH = 64

cdef uint8_t _STOP[256]
"""Bytes that end the plain run of a JSON string: the quote, the backslash, control characters."""
for _c in range(256):
    _STOP[_c] = _c < 32 or _c == 34 or _c == 92

cdef double _POW10[23]
"""1e0 .. 1e22: exact as doubles (Clinger's fast path, below)."""
_POW10[0] = 1.0
for _c in range(1, 23):
    _POW10[_c] = _POW10[_c - 1] * 10.0

# The secret screen of ``args`` (:func:`_screen`): every match of
# trace_report.redact.PRECHECK_PATTERN contains one of these words, compared case-insensitively
# (``gh`` stands for ``gh[pousr]_``, ``--`` for ``-----BEGIN`` and ``--flag``, ``auth`` for
# ``authorization``, ``secret`` for ``aws_secret``, ``k_live_``/``k_test_`` for Stripe's
# ``[sr]k_live_``, ``://`` for a URL with a password, the MySQL-like command words for a glued
# ``-p``). Keep in step with that pattern; the test tests/formats/test_scan_screen.py checks the
# screen against it.
_ANCHORS = (b"hf_", b"sk-", b"akia", b"asia", b"gh", b"github_pat_", b"xox", b"eyj", b"--", b"bearer",
            b"auth", b"secret", b"token", b"key", b"passw", b"credential",
            b"glpat-", b"gloas-", b"gldt-", b"glrt-", b"glcbt-", b"glptt-", b"glft-", b"glimt-", b"glagent-",
            b"glsoat-", b"glffct-", b"k_live_", b"k_test_", b"aiza", b"npm_", b"pypi-", b"://", b"mysql",
            b"mariadb", b"sshpass")
cdef enum:
    N_ANCHORS = 36
    ANCHOR_MAX = 12
cdef uint8_t _ANCHOR_TEXT[N_ANCHORS][ANCHOR_MAX]
cdef Py_ssize_t _ANCHOR_LEN[N_ANCHORS]
cdef uint8_t _LOWER[256]
"""ASCII letters folded to lower case; other bytes unchanged."""
cdef uint8_t _CLASS[256]
"""0: a byte no anchor begins with; 1-26: a letter (either case); 27 '-'; 28 '_'; 29 ':'; 30 '/';
255: a non-ASCII byte (Unicode case folding could make a word of it: RE2 matches ``K`` with the
Kelvin sign)."""
cdef uint64_t _PAIR[32 * 32]
"""Bit ``k`` set where anchor ``k`` begins with a byte of class ``a`` then one of class ``b``
(``a * 32 + b``): only those anchors are compared there."""
for _c in range(256):
    _LOWER[_c] = _c + 32 if 65 <= _c <= 90 else _c
    _CLASS[_c] = 255 if _c >= 128 else (_LOWER[_c] - 96 if 97 <= _LOWER[_c] <= 122 else
                                        {45: 27, 95: 28, 58: 29, 47: 30}.get(_c, 0))
for _c in range(32 * 32):
    _PAIR[_c] = 0
assert len(_ANCHORS) == N_ANCHORS <= 64
for _k, _word in enumerate(_ANCHORS):
    assert len(_word) <= ANCHOR_MAX
    _ANCHOR_LEN[_k] = len(_word)
    for _c in range(len(_word)):
        _ANCHOR_TEXT[_k][_c] = _word[_c]
    _PAIR[_CLASS[_word[0]] * 32 + _CLASS[_word[1]]] |= (<uint64_t>1) << _k


cdef struct Buf:
    char* data
    Py_ssize_t size
    Py_ssize_t cap


# Buffer writes return -1 when memory runs out (no exception: the scan runs without the GIL, so
# that decoding threads scan pieces side by side); scan_events raises MemoryError.

cdef int _reserve(Buf* b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef char* p
    if b.size + extra <= b.cap:
        return 0
    cap = b.cap * 2
    if cap < b.size + extra:
        cap = b.size + extra
    if cap < 4096:
        cap = 4096
    p = <char*>realloc(b.data, cap)
    if p == NULL:
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline int _put_u8(Buf* b, uint8_t v) noexcept nogil:
    if b.size + 1 > b.cap and _reserve(b, 1) < 0:
        return -1
    (<uint8_t*>(b.data + b.size))[0] = v
    b.size += 1
    return 0


cdef inline int _put_i32(Buf* b, int32_t v) noexcept nogil:
    if b.size + 4 > b.cap and _reserve(b, 4) < 0:
        return -1
    memcpy(b.data + b.size, &v, 4)
    b.size += 4
    return 0


cdef inline int _put_8(Buf* b, const void* src) noexcept nogil:
    if b.size + 8 > b.cap and _reserve(b, 8) < 0:
        return -1
    memcpy(b.data + b.size, src, 8)
    b.size += 8
    return 0


cdef inline int _put(Buf* b, const void* src, Py_ssize_t n) noexcept nogil:
    if b.size + n > b.cap and _reserve(b, n) < 0:
        return -1
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef class _Owned:
    """A column buffer handed to Arrow/numpy without a copy (buffer protocol); freed with it."""

    cdef char* data
    cdef Py_ssize_t size

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.data if self.data != NULL else <char*>_EMPTY, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef char _EMPTY[1]


cdef _Owned _take(Buf* b):
    cdef char* fit
    out = _Owned()
    if b.data != NULL and b.size > 0 and b.cap - b.size >= 65536:  # what _presize reserved and
        fit = <char*>realloc(b.data, b.size)  # was not used goes back to the heap (in place)
        if fit != NULL:
            b.data = fit
    out.data = b.data
    out.size = b.size
    b.data = NULL
    b.size = b.cap = 0
    return out


cdef struct Text:
    Buf data
    Buf offsets  # int32, rows + 1
    Buf valid  # uint8 per row


cdef struct Num:
    Buf values  # double or int64 per row
    Buf valid


cdef struct Span:
    Py_ssize_t start  # -1: absent or null
    Py_ssize_t n


cdef enum:
    CACHE_SLOTS = 512  # a power of two


# The secret screen of one piece's ``args`` (_suspect): ``suspect`` for the row being read, and
# strings already found clean (pointers into the piece, direct-mapped by a hash of their length
# and three of their bytes), so that Kineto's few keys, met on every event, are compared
# (memcmp) rather than screened again.
cdef struct Screen:
    int suspect
    const uint8_t* start[CACHE_SLOTS]
    Py_ssize_t length[CACHE_SLOTS]


cdef struct Event:
    Span ph
    Span cat
    Span name
    Span pid
    Span tid
    Span args
    double ts
    double dur
    int has_ts
    int has_dur
    int64_t ints[5]  # correlation, External id, external id, stream, device
    int has_int[5]
    unsigned int seen
    Screen* screen


# ---------------------------------------------------------------- the secret screen


cdef int _anchor_at(const uint8_t* p, Py_ssize_t j, Py_ssize_t e, uint64_t which) noexcept nogil:
    """Whether one of the anchor words ``which`` (bits, :data:`_PAIR`) starts at ``p[j]`` (and
    ends by ``e``), case-insensitively."""
    cdef Py_ssize_t a = 0, q, m
    while which:
        if which & 1:
            m = _ANCHOR_LEN[a]
            if j + m <= e:
                q = 0
                while q < m and _LOWER[p[j + q]] == _ANCHOR_TEXT[a][q]:
                    q += 1
                if q == m:
                    return 1
        which >>= 1
        a += 1
    return 0


cdef int _screen(const uint8_t* p, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    """Whether the raw string content ``p[s:e]`` could hold a secret: it has an anchor word
    or a non-ASCII byte. A pair table finds where a word may start, and which; only those words are
    compared, so the screen costs about one table look-up per byte."""
    cdef uint8_t prev = 0, c
    cdef uint64_t which
    cdef Py_ssize_t j
    for j in range(s, e):
        c = _CLASS[p[j]]
        if c == 255:
            return 1
        which = _PAIR[prev * 32 + c]
        if which and _anchor_at(p, j - 1, e, which):
            return 1
        prev = c
    return 0


cdef inline int _same(const uint8_t* a, const uint8_t* b, Py_ssize_t k) noexcept nogil:
    """``a[:k] == b[:k]``, 8 bytes at a time (the keys compared are short: no libc call)."""
    cdef uint64_t x, y
    while k >= 8:
        memcpy(&x, a, 8)
        memcpy(&y, b, 8)
        if x != y:
            return 0
        a += 8
        b += 8
        k -= 8
    while k > 0:
        if a[0] != b[0]:
            return 0
        a += 1
        b += 1
        k -= 1
    return 1


cdef int _suspect(Screen* sc, const uint8_t* p, Py_ssize_t s, Py_ssize_t k) noexcept nogil:
    """:func:`_screen` of ``p[s:s+k]``, answered from ``sc``'s cache of clean strings when it
    holds this one."""
    cdef size_t h
    if k == 0:
        return 0
    h = (<size_t>k * 31 + <size_t>p[s] * 7 + <size_t>p[s + k - 1] * 131 + p[s + (k >> 1)]) & (CACHE_SLOTS - 1)
    if sc.length[h] == k:
        if k < 32:
            if _same(sc.start[h], p + s, k):
                return 0
        elif memcmp(sc.start[h], p + s, k) == 0:  # a call stack: the C library compares it faster
            return 0
    if _screen(p, s, s + k):
        return 1
    sc.start[h] = p + s
    sc.length[h] = k
    return 0


# ---------------------------------------------------------------- the JSON grammar


cdef inline Py_ssize_t _ws(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and (p[i] == 32 or p[i] == 10 or p[i] == 13 or p[i] == 9):
        i += 1
    return i


cdef inline int _hex(uint8_t c) noexcept nogil:
    return (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)


cdef inline uint64_t _has_stop(uint64_t w) noexcept nogil:
    """Nonzero when one of the 8 bytes of ``w`` is in ``_STOP`` (a quote, a backslash or below
    0x20): the zero-byte and less-than word tests of "Bit Twiddling Hacks" (S. E. Anderson,
    Stanford), exact as to whether such a byte exists. Each flags a byte's top bit; a borrow can
    flag bytes above a true one but never below it, so the lowest flagged byte is the first stop
    byte of the word (``w`` loaded little-endian)."""
    cdef uint64_t q = w ^ 0x2222222222222222ULL
    cdef uint64_t b = w ^ 0x5C5C5C5C5C5C5C5CULL
    return (((q - 0x0101010101010101ULL) & ~q) | ((b - 0x0101010101010101ULL) & ~b)
            | ((w - 0x2020202020202020ULL) & ~w)) & 0x8080808080808080ULL


cdef Py_ssize_t _string(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, int* escaped) noexcept nogil:
    """``p[i]`` is the opening quote: index past the closing quote, or -1 (invalid). The plain
    run is skipped 8 bytes at a time (:func:`_has_stop`), straight to the first stop byte of the
    word that holds one (``TR_FIRST_FLAGGED_BYTE``; byte by byte where that is not available)."""
    cdef uint8_t c
    cdef uint64_t w, stops
    cdef int words
    i += 1
    while i < n:
        words = 0
        while i + 8 <= n:
            memcpy(&w, p + i, 8)
            stops = _has_stop(w)
            if stops:
                i += TR_FIRST_FLAGGED_BYTE(stops)
                break
            i += 8
            words += 1
            if words == 2:  # a long run (a call stack, a path): 16 bytes at a time from here
                i = TR_SKIP_PLAIN(p, i, n)
        while i < n and not _STOP[p[i]]:
            i += 1
        if i >= n:
            return -1
        c = p[i]
        if c == 34:
            return i + 1
        if c == 92:
            escaped[0] = 1
            if i + 1 >= n:
                return -1
            c = p[i + 1]
            if c == 117:  # \uXXXX
                if i + 5 >= n or not (_hex(p[i + 2]) and _hex(p[i + 3]) and _hex(p[i + 4]) and _hex(p[i + 5])):
                    return -1
                i += 6
                continue
            if c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110 or c == 114 or c == 116:
                i += 2
                continue
            return -1
        if c < 32:
            return -1
        i += 1
    return -1


cdef struct NumParse:
    uint64_t m  # the significant digits read (leading zeros skipped), while at most 19
    int digits  # significant digits
    int int_digits  # digits of the integer part, as written
    int frac  # digits after the decimal point
    int exp  # the exponent as written
    int neg
    int is_int  # no fraction, no exponent
    int big  # over 19 significant digits or an exponent over 400: never the fast path


cdef Py_ssize_t _num(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, NumParse* r) noexcept nogil:
    """A JSON number at ``p[i]`` (RFC 8259): index past it, or -1, its parts read into ``r`` in
    the same pass (for :func:`_fast_float` and :func:`_int_literal`). A number that overflows a
    double (``1e999``) is refused, as msgspec refuses it. (The parts are kept in locals: a store
    through ``r`` could alias the bytes read, for the compiler.)"""
    cdef Py_ssize_t start = i, first
    cdef uint64_t m = 0
    cdef int digits = 0, int_digits, frac = 0, e = 0, eneg = 0, big = 0
    cdef uint8_t c
    r.neg = 0
    r.is_int = 1
    r.exp = 0
    if i < n and p[i] == 45:
        r.neg = 1
        i += 1
    if i >= n:
        return -1
    first = i
    if p[i] == 48:
        i += 1
    elif 49 <= p[i] <= 57:  # no leading zero: every digit is significant
        while i < n and 48 <= p[i] <= 57:
            m = m * 10 + (p[i] - 48)
            i += 1
        digits = <int>(i - first)
    else:
        return -1
    int_digits = <int>(i - first)
    if i < n and p[i] == 46:
        r.is_int = 0
        i += 1
        if i >= n or not (48 <= p[i] <= 57):
            return -1
        first = i
        while i < n and 48 <= p[i] <= 57:
            c = p[i] - 48
            if m or c:
                digits += 1
            if digits <= 19:
                m = m * 10 + c
            i += 1
        frac = <int>(i - first)
    if i < n and (p[i] == 101 or p[i] == 69):
        r.is_int = 0
        i += 1
        if i < n and (p[i] == 43 or p[i] == 45):
            eneg = p[i] == 45
            i += 1
        if i >= n or not (48 <= p[i] <= 57):
            return -1
        while i < n and 48 <= p[i] <= 57:
            if e <= 400:
                e = e * 10 + (p[i] - 48)
            i += 1
        if e > 400:
            big = 1
        r.exp = -e if eneg else e
        if isinf(strtod(<const char*>(p + start), NULL)):
            return -1
    elif i - start > 300:
        if isinf(strtod(<const char*>(p + start), NULL)):
            return -1
    r.m = m
    r.digits = digits
    r.int_digits = int_digits
    r.frac = frac
    r.big = big or digits > 19
    return i


cdef inline Py_ssize_t _screened_string(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Screen* sc) noexcept nogil:
    """:func:`_string`; with ``sc``, sets ``sc.suspect`` where the string has an escape or
    fails :func:`_suspect` (it is never cleared here)."""
    cdef int esc = 0
    cdef Py_ssize_t j = _string(p, i, n, &esc)
    if sc != NULL and j >= 0 and not sc.suspect and (esc or _suspect(sc, p, i + 1, j - i - 2)):
        sc.suspect = 1
    return j


cdef Py_ssize_t _value(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, int depth, Screen* sc) noexcept nogil:
    """Skip (and check) any JSON value at ``p[i]``: index past it, or -1. With ``sc``, its
    strings (keys included) go through the secret screen (:func:`_screened_string`)."""
    cdef NumParse number
    cdef uint8_t c
    if i >= n or depth > MAX_DEPTH:
        return -1
    c = p[i]
    if c == 34:
        return _screened_string(p, i, n, sc)
    if c == 123:  # {
        i = _ws(p, i + 1, n)
        if i < n and p[i] == 125:
            return i + 1
        while True:
            if i >= n or p[i] != 34:
                return -1
            i = _screened_string(p, i, n, sc)
            if i < 0:
                return -1
            i = _ws(p, i, n)
            if i >= n or p[i] != 58:
                return -1
            i = _value(p, _ws(p, i + 1, n), n, depth + 1, sc)
            if i < 0:
                return -1
            i = _ws(p, i, n)
            if i < n and p[i] == 44:
                i = _ws(p, i + 1, n)
                continue
            if i < n and p[i] == 125:
                return i + 1
            return -1
    if c == 91:  # [
        i = _ws(p, i + 1, n)
        if i < n and p[i] == 93:
            return i + 1
        while True:
            i = _value(p, i, n, depth + 1, sc)
            if i < 0:
                return -1
            i = _ws(p, i, n)
            if i < n and p[i] == 44:
                i = _ws(p, i + 1, n)
                continue
            if i < n and p[i] == 93:
                return i + 1
            return -1
    if c == 116:
        return i + 4 if i + 4 <= n and memcmp(p + i, b"true", 4) == 0 else -1
    if c == 102:
        return i + 5 if i + 5 <= n and memcmp(p + i, b"false", 5) == 0 else -1
    if c == 110:
        return i + 4 if i + 4 <= n and memcmp(p + i, b"null", 4) == 0 else -1
    if c == 45 or 48 <= c <= 57:
        return _num(p, i, n, &number)
    return -1


cdef inline int _is_null(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    return i + 4 <= n and memcmp(p + i, b"null", 4) == 0


cdef inline int _key_is(const uint8_t* p, Py_ssize_t s, Py_ssize_t k, const char* name, Py_ssize_t m) noexcept nogil:
    return k == m and memcmp(p + s, name, m) == 0


# ---------------------------------------------------------------- one event's fields


cdef Py_ssize_t _text_field(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Span* out) noexcept nogil:
    """A string without escapes, or null: its content span. -1 for anything else."""
    cdef int esc = 0
    cdef Py_ssize_t j
    if i < n and p[i] == 34:
        j = _string(p, i, n, &esc)
        if j < 0 or esc:
            return -1
        out.start = i + 1
        out.n = j - i - 2
        return j
    if _is_null(p, i, n):
        out.start = -1
        return i + 4
    return -1


cdef Py_ssize_t _int_literal(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, int64_t* value) noexcept nogil:
    """An integer of at most 18 digits (not ``-0``): index past it, or -1."""
    cdef NumParse r
    cdef Py_ssize_t j = _num(p, i, n, &r)
    if j < 0 or not r.is_int or r.int_digits > 18 or (r.neg and r.m == 0):
        return -1
    value[0] = -<int64_t>r.m if r.neg else <int64_t>r.m
    return j


cdef Py_ssize_t _id_field(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Span* out) noexcept nogil:
    """pid/tid: an integer (its digits are the text) or a string without escapes, or null."""
    cdef int64_t v
    cdef Py_ssize_t j
    if i < n and (p[i] == 45 or 48 <= p[i] <= 57):
        j = _int_literal(p, i, n, &v)
        if j < 0:
            return -1
        out.start = i
        out.n = j - i
        return j
    return _text_field(p, i, n, out)


cdef inline int _fast_float(const NumParse* r, double* out) noexcept nogil:
    """The number read into ``r`` as a double when Clinger's fast path is exact: a mantissa of
    at most 16 digits and below 2**53 times or over a power of ten up to 1e22, both exact
    doubles, so one IEEE multiplication or division rounds correctly (W. D. Clinger, "How to
    read floating point numbers accurately", PLDI 1990), as strtod and msgspec do. Returns 0
    when it is not."""
    cdef int exp
    cdef double v
    if r.big or r.digits > 16 or r.m >= (1ULL << 53):
        return 0
    exp = r.exp - r.frac
    if exp < -22 or exp > 22:
        return 0
    v = <double>r.m
    v = v * _POW10[exp] if exp >= 0 else v / _POW10[-exp]
    out[0] = -v if r.neg else v
    return 1


cdef Py_ssize_t _float_field(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, double* value, int* has) noexcept nogil:
    cdef NumParse r
    cdef Py_ssize_t j
    if _is_null(p, i, n):
        has[0] = 0
        return i + 4
    if i >= n or not (p[i] == 45 or 48 <= p[i] <= 57):
        return -1
    j = _num(p, i, n, &r)
    if j < 0:
        return -1
    if not _fast_float(&r, value):
        value[0] = strtod(<const char*>(p + i), NULL)
    if isinf(value[0]):
        return -1
    has[0] = 1
    return j


cdef Py_ssize_t _args(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Event* ev) noexcept nogil:
    """``args``: an object (its id fields read) or null; its raw span is kept."""
    cdef Py_ssize_t start = i, s, k, j
    cdef int esc, which
    cdef unsigned int seen = 0
    if _is_null(p, i, n):
        ev.args.start = i
        ev.args.n = 4
        return i + 4
    if i >= n or p[i] != 123:
        return -1
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        ev.args.start = start
        ev.args.n = i + 1 - start
        return i + 1
    while True:
        if i >= n or p[i] != 34:
            return -1
        esc = 0
        j = _string(p, i, n, &esc)
        if j < 0:
            return -1
        s = i + 1
        k = j - i - 2
        i = _ws(p, j, n)
        if i >= n or p[i] != 58:
            return -1
        i = _ws(p, i + 1, n)
        which = -1
        if esc:
            which = -2
        elif _key_is(p, s, k, b"correlation", 11):
            which = 0
        elif _key_is(p, s, k, b"External id", 11):
            which = 1
        elif _key_is(p, s, k, b"external id", 11):
            which = 2
        elif _key_is(p, s, k, b"stream", 6):
            which = 3
        elif _key_is(p, s, k, b"device", 6):
            which = 4
        if which == -2:
            return -1  # an escaped key might spell one of ours: msgspec decides
        if which == -1 and not ev.screen.suspect and _suspect(ev.screen, p, s, k):
            ev.screen.suspect = 1  # (our own keys hold no anchor word: they need no screen)
        if which >= 0:
            if seen & (1u << which):
                return -1
            seen |= 1u << which
            if _is_null(p, i, n):
                i += 4
            else:
                i = _int_literal(p, i, n, &ev.ints[which])
                if i < 0:
                    return -1
                ev.has_int[which] = 1
        else:
            i = _value(p, i, n, 2, ev.screen)
            if i < 0:
                return -1
        i = _ws(p, i, n)
        if i < n and p[i] == 44:
            i = _ws(p, i + 1, n)
            continue
        if i < n and p[i] == 125:
            ev.args.start = start
            ev.args.n = i + 1 - start
            return i + 1
        return -1


cdef inline int _event_key(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Py_ssize_t* end) noexcept nogil:
    """``p[i]`` is a quote: which of the keys read from an event starts there (``"ph"`` 0,
    ``"cat"`` 1, ``"name"`` 2, ``"pid"`` 3, ``"tid"`` 4, ``"ts"`` 5, ``"dur"`` 6, ``"args"`` 7),
    with ``end`` just past its closing quote; -1 for any other string. Compared in place, the
    quotes included, so that the keys of every event are not scanned as strings."""
    cdef uint8_t c
    if i + 6 > n:  # the longest key and its quotes; a piece ends with ']' after the last event
        return _short_event_key(p, i, n, end)
    c = p[i + 1]
    if c == 112:  # p
        if _rest_is(p, i, b'h"', 2, end):
            return 0
        if _rest_is(p, i, b'id"', 3, end):
            return 3
    elif c == 116:  # t
        if _rest_is(p, i, b's"', 2, end):
            return 5
        if _rest_is(p, i, b'id"', 3, end):
            return 4
    elif c == 99 and _rest_is(p, i, b'at"', 3, end):  # c
        return 1
    elif c == 110 and _rest_is(p, i, b'ame"', 4, end):  # n
        return 2
    elif c == 100 and _rest_is(p, i, b'ur"', 3, end):  # d
        return 6
    elif c == 97 and _rest_is(p, i, b'rgs"', 4, end):  # a
        return 7
    return -1


cdef inline int _rest_is(const uint8_t* p, Py_ssize_t i, const char* rest, Py_ssize_t m, Py_ssize_t* end) noexcept nogil:
    """Whether the ``m`` bytes after a key's quote and first letter (at ``p[i]``) are ``rest``
    (its other letters and closing quote); ``end`` is then set past them."""
    if memcmp(p + i + 2, rest, m) != 0:
        return 0
    end[0] = i + 2 + m
    return 1


cdef int _short_event_key(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Py_ssize_t* end) noexcept nogil:
    """:func:`_event_key` within the last bytes of a piece (no valid piece has a key there, but
    the answer stays exact): the same comparisons on those bytes padded with zeros."""
    cdef uint8_t padded[8]
    cdef Py_ssize_t j = 0
    cdef int which
    memset(padded, 0, 8)
    memcpy(padded, p + i, n - i)
    which = _event_key(padded, 0, 8, &j)
    if which < 0 or j > n - i:
        return -1
    end[0] = i + j
    return which


cdef Py_ssize_t _event(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Event* ev) noexcept nogil:
    """One event object at ``p[i]``: index past it, or -1."""
    cdef Py_ssize_t j
    cdef int esc, which
    if i >= n or p[i] != 123:
        return -1
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while True:
        if i >= n or p[i] != 34:
            return -1
        which = _event_key(p, i, n, &j)
        if which == -1:  # any other key, read as a string (it may have escapes: not ours then)
            esc = 0
            j = _string(p, i, n, &esc)
            if j < 0 or esc:
                return -1
        i = _ws(p, j, n)
        if i >= n or p[i] != 58:
            return -1
        i = _ws(p, i + 1, n)
        if which >= 0:
            if ev.seen & (1u << which):
                return -1
            ev.seen |= 1u << which
        if which == 0:
            i = _text_field(p, i, n, &ev.ph)
        elif which == 1:
            i = _text_field(p, i, n, &ev.cat)
        elif which == 2:
            i = _text_field(p, i, n, &ev.name)
        elif which == 3:
            i = _id_field(p, i, n, &ev.pid)
        elif which == 4:
            i = _id_field(p, i, n, &ev.tid)
        elif which == 5:
            i = _float_field(p, i, n, &ev.ts, &ev.has_ts)
        elif which == 6:
            i = _float_field(p, i, n, &ev.dur, &ev.has_dur)
        elif which == 7:
            i = _args(p, i, n, ev)
        else:
            i = _value(p, i, n, 1, NULL)
        if i < 0:
            return -1
        i = _ws(p, i, n)
        if i < n and p[i] == 44:
            i = _ws(p, i + 1, n)
            continue
        if i < n and p[i] == 125:
            return i + 1
        return -1


# ---------------------------------------------------------------- columns


cdef inline int _text_row(Text* col, const uint8_t* p, Span span) noexcept nogil:
    cdef uint8_t ok = span.start >= 0
    if ok and _put(&col.data, p + span.start, span.n) < 0:
        return -1
    if _put_i32(&col.offsets, <int32_t>col.data.size) < 0:
        return -1
    return _put_u8(&col.valid, ok)


cdef inline int _num_row(Num* col, const void* value, int has) noexcept nogil:
    cdef int64_t zero = 0
    if _put_8(&col.values, value if has else <const void*>&zero) < 0:
        return -1
    return _put_u8(&col.valid, has != 0)


cdef tuple _text_out(Text* col):
    return (_take(&col.data), _take(&col.offsets), _take(&col.valid))


cdef tuple _num_out(Num* col):
    return (_take(&col.values), _take(&col.valid))


cdef void _free_text(Text* col) noexcept:
    free(col.data.data); free(col.offsets.data); free(col.valid.data)
    col.data.data = col.offsets.data = col.valid.data = NULL


cdef void _free_num(Num* col) noexcept:
    free(col.values.data); free(col.valid.data)
    col.values.data = col.valid.data = NULL


cdef int _keep(const uint8_t* p, Event* ev) noexcept nogil:
    """``ph == "X"``, or a ``[memory]`` instant event (``ph`` "i" or "I")."""
    if ev.ph.start < 0 or ev.ph.n != 1:
        return 0
    if p[ev.ph.start] == 88:
        return 1
    if p[ev.ph.start] != 105 and p[ev.ph.start] != 73:
        return 0
    return ev.name.start >= 0 and ev.name.n == 8 and memcmp(p + ev.name.start, b"[memory]", 8) == 0


cdef enum:
    SCAN_OK = 0
    SCAN_DECLINE = 1
    SCAN_NO_MEMORY = -1


cdef int _rows(const uint8_t* p, Py_ssize_t n, const uint8_t* mc, Py_ssize_t mc_n, Text* texts, Num* nums,
               Buf* suspects, Py_ssize_t* counts) noexcept nogil:
    """Scan the array at ``p[0:n]`` into the columns; ``counts`` = events, rows, rows missing a
    time; ``suspects``: one byte per row, 1 where its ``args`` may hold a secret. SCAN_OK,
    SCAN_DECLINE (msgspec decodes it) or SCAN_NO_MEMORY. With ``texts`` NULL (:func:`scan_only`)
    no column is written: the same checks and counts."""
    cdef Py_ssize_t i
    cdef Event ev
    cdef int is_x, t, bad
    cdef double zero_dur = 0.0
    cdef Span cat
    cdef Screen screen
    for t in range(CACHE_SLOTS):
        screen.length[t] = -1
    ev.screen = &screen
    i = _ws(p, 0, n)
    if i >= n or p[i] != 91:
        return SCAN_DECLINE
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 93:
        return SCAN_OK if _ws(p, i + 1, n) == n else SCAN_DECLINE
    while True:
        ev.ph.start = ev.cat.start = ev.name.start = ev.pid.start = ev.tid.start = ev.args.start = -1
        ev.has_ts = ev.has_dur = 0
        for t in range(5):
            ev.has_int[t] = 0
            ev.ints[t] = 0
        ev.seen = 0
        screen.suspect = 0
        i = _event(p, i, n, &ev)
        if i < 0:
            return SCAN_DECLINE
        counts[0] += 1
        if _keep(p, &ev):
            is_x = p[ev.ph.start] == 88
            counts[1] += 1
            if not ev.has_ts or (is_x and not ev.has_dur):
                counts[2] += 1
            if texts != NULL:  # NULL: scan_only, nothing written
                cat = ev.cat
                bad = 0
                if not is_x and (cat.start < 0 or cat.n == 0):
                    bad |= _put(&texts[0].data, mc, mc_n)
                    bad |= _put_i32(&texts[0].offsets, <int32_t>texts[0].data.size)
                    bad |= _put_u8(&texts[0].valid, 1)
                else:
                    bad |= _text_row(&texts[0], p, cat)
                bad |= _text_row(&texts[1], p, ev.name)
                bad |= _text_row(&texts[2], p, ev.pid)
                bad |= _text_row(&texts[3], p, ev.tid)
                bad |= _text_row(&texts[4], p, ev.args)
                bad |= _put_u8(suspects, screen.suspect != 0)
                bad |= _num_row(&nums[0], &ev.ts, ev.has_ts)
                if is_x:
                    bad |= _num_row(&nums[1], &ev.dur, ev.has_dur)
                else:
                    bad |= _num_row(&nums[1], &zero_dur, 1)
                bad |= _num_row(&nums[2], &ev.ints[3], ev.has_int[3])
                bad |= _num_row(&nums[3], &ev.ints[4], ev.has_int[4])
                bad |= _num_row(&nums[4], &ev.ints[0], ev.has_int[0])
                if ev.has_int[1]:
                    bad |= _num_row(&nums[5], &ev.ints[1], 1)
                else:
                    bad |= _num_row(&nums[5], &ev.ints[2], ev.has_int[2])
                if bad:
                    return SCAN_NO_MEMORY
        i = _ws(p, i, n)
        if i < n and p[i] == 44:
            i = _ws(p, i + 1, n)
            continue
        if i < n and p[i] == 93:
            return SCAN_OK if _ws(p, i + 1, n) == n else SCAN_DECLINE
        return SCAN_DECLINE


cdef int _presize(Py_ssize_t n, Text* texts, Num* nums, Buf* suspects) noexcept:
    """Reserve the columns of a piece of ``n`` bytes once, so that they are not copied as they
    grow (``realloc``): ``args`` up to ``n`` (it is a part of the piece: 83% of a rank trace's
    bytes, 28% of an event-dense one's), per-row buffers for an event every 128 bytes (191 and
    790 bytes per event in the benchmark traces), the other texts at 8-24 bytes a row. Pages
    never written are never touched, so a generous reservation costs no memory; a column that
    outgrows it still grows by doubling."""
    cdef Py_ssize_t rows = n // 128 + 16
    cdef int c
    if _reserve(&texts[4].data, n) < 0 or _reserve(suspects, rows) < 0:
        return -1
    for c in range(5):
        if (_reserve(&texts[c].offsets, 4 * (rows + 1)) < 0 or _reserve(&texts[c].valid, rows) < 0
                or (c < 4 and _reserve(&texts[c].data, (24 if c == 1 else 8) * rows) < 0)):
            return -1
    for c in range(6):
        if _reserve(&nums[c].values, 8 * rows) < 0 or _reserve(&nums[c].valid, rows) < 0:
            return -1
    return 0


def scan_events(const unsigned char[::1] buf, bytes memory_cat):
    """Columns of the kept events of one piece, or None (decode it with msgspec instead).

    ``buf``: the bytes of a JSON array of events (valid UTF-8: the caller checks). Returns
    ``(n_events, n_rows, n_missing, texts, numbers, suspects)``: ``texts`` = (cat, name, pid,
    tid, args), each ``(data, int32 offsets incl. a leading 0, uint8 validity)``; ``numbers`` =
    (ts, dur, stream, device, correlation, external_id), each ``(float64 or int64 values, uint8
    validity)``; ``suspects``: one byte per row, 0 where its ``args`` cannot match
    :data:`trace_report.redact.PRECHECK_PATTERN` (no string in it has an anchor word of
    ``_ANCHORS``, an escape or a non-ASCII byte), so the secret screen may skip it.
    Instant events get ``dur`` 0 and, without a category, ``memory_cat``. The scan itself runs
    without the GIL: threads scan pieces in parallel. Raises MemoryError when a column cannot grow.
    """
    cdef const uint8_t* p = &buf[0] if buf.shape[0] else NULL
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t counts[3]
    cdef Text texts[5]
    cdef Num nums[6]
    cdef Buf suspects
    cdef int c, status
    cdef int32_t zero = 0
    cdef const uint8_t* mc = memory_cat
    cdef Py_ssize_t mc_n = len(memory_cat)
    counts[0] = counts[1] = counts[2] = 0
    for c in range(5):
        texts[c].data.data = texts[c].offsets.data = texts[c].valid.data = NULL
        texts[c].data.size = texts[c].offsets.size = texts[c].valid.size = 0
        texts[c].data.cap = texts[c].offsets.cap = texts[c].valid.cap = 0
    for c in range(6):
        nums[c].values.data = nums[c].valid.data = NULL
        nums[c].values.size = nums[c].valid.size = 0
        nums[c].values.cap = nums[c].valid.cap = 0
    suspects.data = NULL
    suspects.size = suspects.cap = 0
    try:
        if _presize(n, texts, nums, &suspects) < 0:
            raise MemoryError()
        for c in range(5):
            if _put(&texts[c].offsets, &zero, 4) < 0:
                raise MemoryError()
        with nogil:
            status = _rows(p, n, mc, mc_n, texts, nums, &suspects, counts)
        if status == SCAN_NO_MEMORY:
            raise MemoryError()
        if status == SCAN_DECLINE:
            return None
        text_cols = tuple([_text_out(&texts[c]) for c in range(5)])
        num_cols = tuple([_num_out(&nums[c]) for c in range(6)])
        return counts[0], counts[1], counts[2], text_cols, num_cols, _take(&suspects)
    finally:
        free(suspects.data)
        for c in range(5):
            _free_text(&texts[c])
        for c in range(6):
            _free_num(&nums[c])


def scan_only(const unsigned char[::1] buf):
    """What :func:`scan_events` checks and counts, with no column written: ``(n_events, n_rows,
    n_missing)``, or None where :func:`scan_events` would decline the piece (valid UTF-8 asked,
    as there). The floor of the scanner's cost: the "scanner alone" of ``benchmarks/shapes.py``.
    Runs without the GIL."""
    cdef const uint8_t* p = &buf[0] if buf.shape[0] else NULL
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t counts[3]
    cdef int status
    counts[0] = counts[1] = counts[2] = 0
    with nogil:
        status = _rows(p, n, NULL, 0, NULL, NULL, NULL, counts)
    return None if status != SCAN_OK else (counts[0], counts[1], counts[2])
