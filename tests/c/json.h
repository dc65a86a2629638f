/*
** json.h — a small, strict JSON reader for the C test programs.
**
** json_parse() builds a tree of json_value nodes from a complete document
** (RFC 8259: no trailing commas, no leading zeros, no control characters in
** strings, \u escapes with surrogate pairs decoded to UTF-8, raw string bytes
** must be well-formed UTF-8, nothing but whitespace after the value). Every
** node remembers the span of the input it was parsed from, so a member can be
** handed on verbatim (the conformance runner passes "runtime" that way).
** Not for production: recursion is bounded at JSON_MAX_DEPTH.
*/
#ifndef LMS_TEST_JSON_H
#define LMS_TEST_JSON_H

#include <stddef.h>

#define JSON_MAX_DEPTH 128

typedef enum {
    JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;

struct json_value {
    json_type    type;
    int          boolean;   /* JSON_BOOL */
    double       number;    /* JSON_NUMBER */
    char        *string;    /* JSON_STRING: decoded UTF-8, NUL-terminated */
    size_t       length;    /* JSON_STRING: bytes (a \u0000 may be inside) */
    size_t       count;     /* JSON_ARRAY / JSON_OBJECT: number of items */
    json_value **items;     /* the elements, or the members' values */
    char       **keys;      /* JSON_OBJECT: the members' names (decoded) */
    const char  *raw;       /* the value's text in the parsed input */
    size_t       raw_len;
};

/* Parses text[0..len). Returns NULL on error with a message in err
** (which may be NULL). The input must outlive the tree (raw points into it). */
json_value *json_parse(const char *text, size_t len, char *err, size_t err_size);
void json_free(json_value *v);

/* The member named key of an object, or NULL (also when v is not an object). */
const json_value *json_get(const json_value *v, const char *key);
/* Typed look-ups that return dflt when the member is absent or of another type. */
double json_get_number(const json_value *v, const char *key, double dflt);
int json_get_bool(const json_value *v, const char *key, int dflt);
const char *json_get_string(const json_value *v, const char *key, const char *dflt);

/* A copy of the value's raw text, NUL-terminated, to be freed with free(). */
char *json_raw_dup(const json_value *v);

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing
** above U+10FFFF, no truncated sequence). */
int utf8_valid(const char *s, size_t n);

#endif
