/* json.c — see json.h. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s, *end;
    int depth;
    char *err;
    size_t err_size;
    int failed;
} parser;

static void fail(parser *p, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = 1;
    if (p->err && p->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, p->err_size, fmt, ap);
        va_end(ap);
    }
}

int utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) { len = 3; lo = 0xA0; }
        else if (c == 0xED) { len = 3; hi = 0x9F; }  /* no surrogates */
        else if (c >= 0xE1 && c <= 0xEF) len = 3;
        else if (c == 0xF0) { len = 4; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) { len = 4; hi = 0x8F; }  /* nothing above U+10FFFF */
        else return 0;                               /* 80..C1, F5..FF */
        if (n - i < len) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static json_value *new_value(parser *p, json_type t) {
    json_value *v = calloc(1, sizeof *v);
    if (!v) { fail(p, "out of memory"); return NULL; }
    v->type = t;
    v->raw = p->s;
    return v;
}

/* Appends one code point to buf as UTF-8. */
static size_t put_utf8(char *buf, unsigned long cp) {
    if (cp < 0x80) { buf[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6)); buf[1] = (char)(0x80 | (cp & 0x3F)); return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12)); buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    buf[0] = (char)(0xF0 | (cp >> 18)); buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex4(parser *p, unsigned long *out) {
    if (p->end - p->s < 4) { fail(p, "truncated \\u escape"); return 0; }
    unsigned long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *p->s++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned long)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned long)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned long)(c - 'A' + 10);
        else { fail(p, "bad hex digit in \\u escape"); return 0; }
    }
    *out = v;
    return 1;
}

/* Parses a string at p->s (which is at the opening quote). The decoded text
** is never longer than the source, so one allocation of the source span does. */
static char *parse_string(parser *p, size_t *len_out) {
    p->s++; /* the quote */
    const char *start = p->s;
    while (p->s < p->end && *p->s != '"') {
        if (*p->s == '\\' && p->s + 1 < p->end) p->s++;
        p->s++;
    }
    if (p->s >= p->end) { fail(p, "unterminated string"); return NULL; }
    size_t span = (size_t)(p->s - start);
    if (!utf8_valid(start, span)) { fail(p, "string is not valid UTF-8"); return NULL; }
    char *out = malloc(span + 1), *o = out;
    if (!out) { fail(p, "out of memory"); return NULL; }
    p->s = start;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        if (c < 0x20) { fail(p, "control character in string"); break; }
        if (c != '\\') { *o++ = (char)c; continue; }
        char e = *p->s++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned long cp, lo;
            if (!hex4(p, &cp)) break;
            if (cp >= 0xDC00 && cp <= 0xDFFF) { fail(p, "lone low surrogate"); break; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u') {
                    fail(p, "high surrogate without a low one"); break;
                }
                p->s += 2;
                if (!hex4(p, &lo)) break;
                if (lo < 0xDC00 || lo > 0xDFFF) { fail(p, "high surrogate without a low one"); break; }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            o += put_utf8(o, cp);
            break;
        }
        default: fail(p, "bad escape \\%c", e);
        }
        if (p->failed) break;
    }
    if (p->failed) { free(out); return NULL; }
    p->s++; /* closing quote */
    *o = 0;
    *len_out = (size_t)(o - out);
    return out;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static void parse_number(parser *p, json_value *v) {
    const char *s = p->s;
    if (s < p->end && *s == '-') s++;
    if (s >= p->end || !is_digit(*s)) { fail(p, "bad number"); return; }
    if (*s == '0') s++;
    else while (s < p->end && is_digit(*s)) s++;
    if (s < p->end && *s == '.') {
        s++;
        if (s >= p->end || !is_digit(*s)) { fail(p, "bad fraction"); return; }
        while (s < p->end && is_digit(*s)) s++;
    }
    if (s < p->end && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < p->end && (*s == '+' || *s == '-')) s++;
        if (s >= p->end || !is_digit(*s)) { fail(p, "bad exponent"); return; }
        while (s < p->end && is_digit(*s)) s++;
    }
    char tmp[64];
    size_t n = (size_t)(s - p->s);
    if (n >= sizeof tmp) { fail(p, "number too long"); return; }
    memcpy(tmp, p->s, n);
    tmp[n] = 0;
    v->number = strtod(tmp, NULL);
    p->s = s;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0) return 0;
    p->s += n;
    return 1;
}

static int push_item(parser *p, json_value *v, json_value *item, char *key) {
    json_value **items = realloc(v->items, (v->count + 1) * sizeof *items);
    if (!items) { fail(p, "out of memory"); return 0; }
    v->items = items;
    if (v->type == JSON_OBJECT) {
        char **keys = realloc(v->keys, (v->count + 1) * sizeof *keys);
        if (!keys) { fail(p, "out of memory"); return 0; }
        v->keys = keys;
        v->keys[v->count] = key;
    }
    v->items[v->count++] = item;
    return 1;
}

static json_value *parse_value(parser *p);

static void parse_container(parser *p, json_value *v, char close) {
    p->s++; /* [ or { */
    skip_ws(p);
    if (p->s < p->end && *p->s == close) { p->s++; return; }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (close == '}') {
            size_t klen;
            if (p->s >= p->end || *p->s != '"') { fail(p, "expected a member name"); return; }
            if (!(key = parse_string(p, &klen))) return;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') { free(key); fail(p, "expected ':'"); return; }
            p->s++;
        }
        json_value *item = parse_value(p);
        if (!item || !push_item(p, v, item, key)) { free(key); json_free(item); return; }
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') { p->s++; continue; }
        if (p->s < p->end && *p->s == close) { p->s++; return; }
        fail(p, "expected ',' or '%c'", close);
        return;
    }
}

static json_value *parse_value(parser *p) {
    skip_ws(p);
    if (p->s >= p->end) { fail(p, "unexpected end of input"); return NULL; }
    if (++p->depth > JSON_MAX_DEPTH) { fail(p, "nested too deeply"); return NULL; }
    json_value *v = NULL;
    switch (*p->s) {
    case '{': if ((v = new_value(p, JSON_OBJECT))) parse_container(p, v, '}'); break;
    case '[': if ((v = new_value(p, JSON_ARRAY))) parse_container(p, v, ']'); break;
    case '"': if ((v = new_value(p, JSON_STRING))) v->string = parse_string(p, &v->length); break;
    case 't': if ((v = new_value(p, JSON_BOOL)) && !(v->boolean = literal(p, "true"))) fail(p, "bad literal"); break;
    case 'f': if ((v = new_value(p, JSON_BOOL)) && !literal(p, "false")) fail(p, "bad literal"); break;
    case 'n': if ((v = new_value(p, JSON_NULL)) && !literal(p, "null")) fail(p, "bad literal"); break;
    default:  if ((v = new_value(p, JSON_NUMBER))) parse_number(p, v); break;
    }
    p->depth--;
    if (p->failed) { json_free(v); return NULL; }
    v->raw_len = (size_t)(p->s - v->raw);
    return v;
}

json_value *json_parse(const char *text, size_t len, char *err, size_t err_size) {
    parser p = {text, text + len, 0, err, err_size, 0};
    json_value *v = parse_value(&p);
    if (v) {
        skip_ws(&p);
        if (p.s != p.end) { fail(&p, "trailing characters at offset %zu", (size_t)(p.s - text)); json_free(v); v = NULL; }
    }
    if (!v && err && err_size && !p.failed) snprintf(err, err_size, "parse error");
    return v;
}

void json_free(json_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const json_value *json_get(const json_value *v, const char *key) {
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

double json_get_number(const json_value *v, const char *key, double dflt) {
    const json_value *m = json_get(v, key);
    return m && m->type == JSON_NUMBER ? m->number : dflt;
}

int json_get_bool(const json_value *v, const char *key, int dflt) {
    const json_value *m = json_get(v, key);
    return m && m->type == JSON_BOOL ? m->boolean : dflt;
}

const char *json_get_string(const json_value *v, const char *key, const char *dflt) {
    const json_value *m = json_get(v, key);
    return m && m->type == JSON_STRING ? m->string : dflt;
}

char *json_raw_dup(const json_value *v) {
    char *s = malloc(v->raw_len + 1);
    if (!s) return NULL;
    memcpy(s, v->raw, v->raw_len);
    s[v->raw_len] = 0;
    return s;
}
