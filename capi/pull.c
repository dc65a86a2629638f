// The public entry points of the "Models by name" section of lmstream.h,
// guarded against use after fork() like those of shim.c.
#include "lmstream.h"
#include "_cgo_export.h"

extern volatile int lms_forked;

__attribute__((visibility("hidden"))) int lms_call_pull_progress(lms_pull_progress_fn f, const lms_pull_progress *p,
                                                            void *user) {
    return f(p, user);
}

int lms_model_pull(const char *name, lms_pull_progress_fn progress, void *user, char *err, size_t err_size) {
    if (lms_forked) return LMS_ERR_FORKED;
    return lmsgo_model_pull((char *)name, progress, user, err, err_size);
}

int lms_model_path(const char *name, char *buf, size_t size, size_t *len) {
    if (lms_forked) return LMS_ERR_FORKED;
    return lmsgo_model_path((char *)name, buf, size, len);
}
