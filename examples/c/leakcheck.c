/* Engram C API leak check: open, a mix of requests (writes, search, reads, errors, export, tree API), free and
 * close, many times over. Run under valgrind by tests/ffi_c.rs:
 *   valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 ./leakcheck DIR CYCLES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engram.h"

static int request(engram_store *store, const char *method, const char *target, const char *body, uint16_t want) {
    engram_response *resp = NULL;
    engram_result rc = engram_request(store, method, strlen(method), target, strlen(target),
                                      (const uint8_t *)body, body ? strlen(body) : 0, &resp);
    if (rc != ENGRAM_OK) {
        char msg[256];
        engram_last_error(msg, sizeof msg);
        fprintf(stderr, "%s %s: %d %s\n", method, target, rc, msg);
        return 1;
    }
    uint16_t status = engram_response_status(resp);
    size_t len = 0;
    (void)engram_response_body(resp, &len);
    engram_response_free(resp);
    if (status != want) {
        fprintf(stderr, "%s %s: status %u, expected %u\n", method, target, status, want);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "engram-leakcheck";
    int cycles = argc > 2 ? atoi(argv[2]) : 10;
    int bad = 0;
    for (int i = 0; i < cycles && !bad; i++) {
        engram_store *store = NULL;
        if (engram_store_open(dir, strlen(dir), &store) != ENGRAM_OK) {
            char msg[256];
            engram_last_error(msg, sizeof msg);
            fprintf(stderr, "open: %s\n", msg);
            return 1;
        }
        char body[256];
        snprintf(body, sizeof body, "{\"id\":\"m%d\",\"content\":\"Cycle %d note about the lighthouse keeper\",\"labels\":[\"c\"]}", i, i);
        bad |= request(store, "POST", "/memories", body, 200);
        bad |= request(store, "POST", "/memories/search", "{\"query\":\"lighthouse\",\"limit\":5}", 200);
        snprintf(body, sizeof body, "/memories/m%d", i);
        bad |= request(store, "GET", body, NULL, 200);
        bad |= request(store, "GET", "/memories/no-such-id", NULL, 404);
        bad |= request(store, "POST", "/memories", "{\"content\":\"\"}", 422);
        bad |= request(store, "POST", "/memories", "{not json", 422);
        bad |= request(store, "GET", "/fs/grep?q=keeper&path=/memories", NULL, 200);
        bad |= request(store, "POST", "/sources/ingest/file", "{\"file_name\":\"a.md\",\"content\":\"# A\\n\\nSome text about keepers and lights.\"}", 200);
        bad |= request(store, "GET", "/nowhere", NULL, 404);
        engram_response *resp = NULL;
        const char bad_target[] = {'/', (char)0xff};
        if (engram_request(store, "GET", 3, bad_target, sizeof bad_target, NULL, 0, &resp) != ENGRAM_INVALID_UTF8 || resp) {
            bad = 1;
        }
        engram_store_close(store);
    }
    engram_store_close(NULL);
    engram_response_free(NULL);
    if (bad) {
        fprintf(stderr, "leakcheck: a request failed\n");
        return 1;
    }
    printf("leakcheck: %d cycles\n", cycles);
    return 0;
}
