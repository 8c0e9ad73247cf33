/* Engram C example: a store whose records live in a PostgreSQL database (library built with the `postgres`
 * feature). Opens the store in DATABASE_URL (data directory DATA_DIR for local files), stores a memory, reads
 * it back and finds it by search. Any failure to open prints the result code and engram_last_error's message.
 * Build (after `cargo build --release --features ffi,postgres`):
 *   cc examples/c/database.c -Iinclude -Ltarget/release -lengram -Wl,-rpath,$PWD/target/release -o database
 *   ./database /tmp/engram-pg-local 'host=/run/postgresql user=engram dbname=engram'
 */
#include <stdio.h>
#include <string.h>
#include "engram.h"

static int call(engram_store *store, const char *method, const char *target, const char *body,
                uint16_t want_status, const char *want_text) {
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
    printf("%s %s -> %u %.*s\n", method, target, status, (int)(len > 200 ? 200 : len), json);
    static char copy[8192];
    snprintf(copy, sizeof copy, "%.*s", (int)len, json);
    int bad = status != want_status || (want_text && !strstr(copy, want_text));
    engram_response_free(resp);
    if (bad) {
        fprintf(stderr, "expected status %u with \"%s\"\n", want_status, want_text ? want_text : "");
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATA_DIR DATABASE_URL\n", argv[0]);
        return 2;
    }
    engram_store *store = NULL;
    engram_result rc = engram_store_open_database(argv[1], strlen(argv[1]), argv[2], strlen(argv[2]), &store);
    if (rc != ENGRAM_OK) {
        char msg[512];
        engram_last_error(msg, sizeof msg);
        printf("open: %d %s\n", rc, msg);
        return 3;
    }
    int bad = 0;
    bad |= call(store, "POST", "/memories", "{\"id\":\"pg-1\",\"content\":\"The boiler is serviced every October\"}",
                200, "pg-1");
    bad |= call(store, "GET", "/memories/pg-1", NULL, 200, "boiler");
    bad |= call(store, "POST", "/memories/search", "{\"query\":\"when is the boiler serviced\",\"limit\":3}", 200,
                "pg-1");
    engram_store_close(store);
    if (!bad) {
        printf("database: ok\n");
    }
    return bad;
}
