#include <stdio.h>
#include "lmstream.h"

int main(void) {
    char err[512] = "";
    lms_runtime rt;
    int rc = lms_runtime_create("{\"model_path\": \"models/SmolLM2-135M-Instruct.Q4_1.gguf\"}",
                                &rt, err, sizeof err);
    if (rc != LMS_OK) {  /* e.g. LMS_ERR_MODEL: no such file (run `make model`) */
        fprintf(stderr, "lms_runtime_create: %s: %s\n", lms_strerror(rc), err);
        return 1;
    }
    lms_channel ch;
    if ((rc = lms_channel_create(&ch)) != LMS_OK) {
        fprintf(stderr, "lms_channel_create: %s\n", lms_strerror(rc));
        lms_runtime_destroy(rt);
        return 1;
    }
    rc = lms_submit(rt, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 64}",
                    &ch, 1, err, sizeof err);
    if (rc != LMS_OK) {  /* refused: nothing was attached, so there is nothing to wait for */
        fprintf(stderr, "lms_submit: %s: %s\n", lms_strerror(rc), err);
        lms_channel_release(ch);
        lms_runtime_destroy(rt);
        return 1;
    }
    /* An attached channel always gets exactly one terminal chunk, so waiting
    ** without a timeout ends. */
    int status = 1;
    lms_chunk *c;
    while ((rc = lms_channel_wait_pop(ch, -1, &c)) == LMS_OK) {
        fwrite(c->text, 1, c->text_len, stdout);
        int done = c->finished;
        if (done && c->reason == LMS_FINISH_ERROR)
            fprintf(stderr, "\nerror: %s: %s\n", lms_strerror(c->error_code), c->error_message);
        else if (done)
            status = 0;
        lms_chunk_free(c);
        if (done) break;
    }
    if (rc != LMS_OK) fprintf(stderr, "lms_channel_wait_pop: %s\n", lms_strerror(rc));
    putchar('\n');
    lms_channel_release(ch);
    lms_runtime_destroy(rt);
    return status;
}
