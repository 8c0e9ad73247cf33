/* Engram C example: a store that takes caller-supplied vectors (as chromadb, Qdrant and LanceDB do).
 * Opens a store with 4-dimensional external vectors, stores two memories with their vectors, finds the nearer
 * one by query vector, and checks that a bad vector is refused (422 naming the field) with nothing stored.
 * Build (after `cargo build --release --features ffi`):
 *   cc examples/c/vectors.c -Iinclude -Ltarget/release -lengram -Wl,-rpath,$PWD/target/release -o vectors
 *   ./vectors /tmp/engram-vectors
 */
#include <stdio.h>
#include <string.h>
#include "engram.h"

static int call(engram_store *store, const char *method, const char *target, const char *body,
                uint16_t want_status, char *out, size_t out_len) {
    engram_response *resp = NULL;
    engram_result rc = engram_request(store, method, strlen(method), target, strlen(target),
                                      (const uint8_t *)body, body ? strlen(body) : 0, &resp);
    if (rc != ENGRAM_OK) {
        char msg[256];
        engram_last_error(msg, sizeof msg);
        fprintf(stderr, "%s %s failed: %d %s\n", method, target, rc, msg);
        return 1;
    }
    size_t len = 0;
    const char *json = engram_response_body(resp, &len);
    uint16_t status = engram_response_status(resp);
    printf("%s %s -> %u %.*s\n", method, target, status, (int)(len > 300 ? 300 : len), json);
    if (out) {
        snprintf(out, out_len, "%.*s", (int)len, json);
    }
    engram_response_free(resp);
    if (status != want_status) {
        fprintf(stderr, "expected status %u, got %u\n", want_status, status);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 2;
    }
    engram_store *store = NULL;
    if (engram_store_open_external(argv[1], strlen(argv[1]), 0, &store) != ENGRAM_INVALID_INPUT) {
        fprintf(stderr, "dimension 0 was accepted\n");
        return 1;
    }
    engram_result rc = engram_store_open_external(argv[1], strlen(argv[1]), 4, &store);
    if (rc != ENGRAM_OK) {
        char msg[256];
        engram_last_error(msg, sizeof msg);
        fprintf(stderr, "open failed: %d %s\n", rc, msg);
        return 1;
    }
    static char buf[8192];
    int bad = 0;
    bad |= call(store, "POST", "/memories",
                "{\"id\":\"north\",\"content\":\"The cabin is up north by the lake\",\"embedding\":[1,0,0,0]}", 200,
                NULL, 0);
    bad |= call(store, "POST", "/memories",
                "{\"id\":\"south\",\"content\":\"The office is down south\",\"embedding\":[0,1,0,0]}", 200, NULL, 0);
    /* Nearest to a query vector close to [0, 1, 0, 0]: "south" first, by vector alone. */
    bad |= call(store, "POST", "/memories/search",
                "{\"query\":\"\",\"query_embedding\":[0.1,0.9,0,0],\"retrieval\":\"vector\"}", 200, buf, sizeof buf);
    char *first = strstr(buf, "\"id\"");
    if (!first || strncmp(first, "\"id\":\"south\"", 12) != 0) {
        fprintf(stderr, "the nearest memory is not first: %s\n", buf);
        bad = 1;
    }
    /* Wrong dimension: 422 naming body.embedding; the memory is not stored. */
    bad |= call(store, "POST", "/memories", "{\"id\":\"bad\",\"content\":\"three floats\",\"embedding\":[1,2,3]}",
                422, buf, sizeof buf);
    if (!strstr(buf, "\"embedding\"") || !strstr(buf, "embedding_dimension")) {
        fprintf(stderr, "the error does not name the field: %s\n", buf);
        bad = 1;
    }
    bad |= call(store, "GET", "/memories/bad", NULL, 404, NULL, 0);
    /* A search vector of the wrong size is refused the same way. */
    bad |= call(store, "POST", "/memories/search", "{\"query\":\"cabin\",\"query_embedding\":[1,0]}", 422, buf,
                sizeof buf);
    if (!strstr(buf, "query_embedding")) {
        fprintf(stderr, "the error does not name query_embedding: %s\n", buf);
        bad = 1;
    }
    engram_store_close(store);
    if (bad) {
        return 1;
    }
    printf("vectors: ok\n");
    return 0;
}
