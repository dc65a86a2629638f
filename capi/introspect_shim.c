// The public entry points of the header's "Introspection" section: the
// fork guard, then Go (lmsgo_* in introspect.go). Kept apart from shim.c
// so each section's C and Go sit side by side.
#include "lmstream.h"
#include "_cgo_export.h"

__attribute__((visibility("hidden"))) int lms_shim_forked(void);

int lms_tokenize(lms_runtime rt, const char *text, size_t text_len, int flags,
                 int32_t *ids, size_t max_ids, size_t *n_ids,
                 char *err, size_t err_size) {
    if (lms_shim_forked()) return LMS_ERR_FORKED;
    return lmsgo_tokenize(rt, (char *)text, text_len, flags, ids, max_ids, n_ids, err, err_size);
}

int lms_count_tokens(lms_runtime rt, const char *text, size_t text_len, int flags,
                     size_t *n_tokens, char *err, size_t err_size) {
    if (lms_shim_forked()) return LMS_ERR_FORKED;
    return lmsgo_count_tokens(rt, (char *)text, text_len, flags, n_tokens, err, err_size);
}

int lms_detokenize(lms_runtime rt, const int32_t *ids, size_t n_ids, int flags,
                   char *buf, size_t size, size_t *len,
                   char *err, size_t err_size) {
    if (lms_shim_forked()) return LMS_ERR_FORKED;
    return lmsgo_detokenize(rt, (int32_t *)ids, n_ids, flags, buf, size, len, err, err_size);
}

int lms_model_info(lms_runtime rt, char *buf, size_t size, size_t *len) {
    if (lms_shim_forked()) return LMS_ERR_FORKED;
    return lmsgo_model_info(rt, buf, size, len);
}

int lms_render_chat(lms_runtime rt, const char *request_json,
                    char *buf, size_t size, size_t *len,
                    char *err, size_t err_size) {
    if (lms_shim_forked()) return LMS_ERR_FORKED;
    return lmsgo_render_chat(rt, (char *)request_json, buf, size, len, err, err_size);
}
