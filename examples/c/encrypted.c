/* Engram C example: a store encrypted at rest (docs/security.md).
 * Creates the store in DATA_DIR encrypted with a passphrase, writes a memory, searches it, closes, checks that
 * the store file holds no plaintext, that a wrong passphrase is ENGRAM_WRONG_KEY, and that the right one opens
 * the store again with the memory there. The passphrase buffer is the caller's: it is wiped after each call.
 * Build (after `cargo build --release --features ffi`):
 *   cc examples/c/encrypted.c -Iinclude -Ltarget/release -lengram -Wl,-rpath,$PWD/target/release -o encrypted
 *   ./encrypted /tmp/engram-encrypted
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engram.h"

static const char *MARKER = "zanzibar-ostrich-4711";

static engram_result open_with(const char *dir, const char *passphrase, engram_store **out) {
    /* The key lives in a buffer of the caller's, wiped once the call returns. */
    char key[64];
    size_t len = strlen(passphrase);
    memcpy(key, passphrase, len);
    engram_result rc =
        engram_store_open_encrypted(dir, strlen(dir), ENGRAM_KEY_PASSPHRASE, (const uint8_t *)key, len, out);
    memset(key, 0, sizeof key);
    return rc;
}

static int call(engram_store *store, const char *method, const char *target, const char *body,
                uint16_t want_status, char *out, size_t out_len) {
    engram_response *resp = NULL;
    engram_result rc = engram_request(store, method, strlen(method), target, strlen(target),
                                      (const uint8_t *)body, body ? strlen(body) : 0, &resp);
    if (rc != ENGRAM_OK) {
        fprintf(stderr, "%s %s failed: %d\n", method, target, rc);
        return 1;
    }
    size_t len = 0;
    const char *json = engram_response_body(resp, &len);
    uint16_t status = engram_response_status(resp);
    if (out) {
        snprintf(out, out_len, "%.*s", (int)len, json);
    }
    engram_response_free(resp);
    if (status != want_status) {
        fprintf(stderr, "%s %s: expected status %u, got %u\n", method, target, want_status, status);
        return 1;
    }
    return 0;
}

/* Whether the file at `path` contains `needle`. */
static int file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return -1;
    }
    size_t n = strlen(needle), cap = 1 << 20, len = 0, got;
    char *buf = malloc(cap);
    int found = 0;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    for (size_t i = 0; buf && len >= n && i <= len - n && !found; i++) {
        found = memcmp(buf + i, needle, n) == 0;
    }
    free(buf);
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    engram_store *store = NULL;
    engram_result rc = open_with(dir, "correct horse battery staple", &store);
    if (rc != ENGRAM_OK) {
        char msg[256];
        engram_last_error(msg, sizeof msg);
        fprintf(stderr, "open failed: %d %s\n", rc, msg);
        return 1;
    }
    static char buf[16384];
    int bad = 0;
    char body[256];
    snprintf(body, sizeof body, "{\"id\":\"secret\",\"content\":\"The safe code is %s\"}", MARKER);
    bad |= call(store, "POST", "/memories", body, 200, NULL, 0);
    bad |= call(store, "GET", "/memories/search?q=zanzibar", NULL, 200, buf, sizeof buf);
    if (!strstr(buf, MARKER)) {
        fprintf(stderr, "search did not find the memory: %s\n", buf);
        bad = 1;
    }
    bad |= call(store, "GET", "/health", NULL, 200, buf, sizeof buf);
    /* The cipher is XAES-256-GCM on CPUs with AES instructions, XChaCha20-Poly1305 elsewhere. */
    if (!strstr(buf, "\"encrypted\":true")
        || !(strstr(buf, "\"cipher\":\"xaes-256-gcm\"") || strstr(buf, "\"cipher\":\"xchacha20-poly1305\""))) {
        fprintf(stderr, "/health does not say the store is encrypted: %s\n", buf);
        bad = 1;
    }
    engram_store_close(store);

    char path[4096];
    snprintf(path, sizeof path, "%s/engram.redb", dir);
    if (file_contains(path, MARKER) != 0) {
        fprintf(stderr, "the store file holds the plaintext (or cannot be read)\n");
        bad = 1;
    }
    store = NULL;
    rc = open_with(dir, "wrong passphrase", &store);
    if (rc != ENGRAM_WRONG_KEY || store != NULL) {
        fprintf(stderr, "a wrong passphrase gave %d, not ENGRAM_WRONG_KEY\n", rc);
        bad = 1;
    }
    rc = engram_store_open(dir, strlen(dir), &store);
    if (rc != ENGRAM_WRONG_KEY) {
        fprintf(stderr, "opening without a key gave %d, not ENGRAM_WRONG_KEY\n", rc);
        bad = 1;
    }
    if (open_with(dir, "correct horse battery staple", &store) != ENGRAM_OK) {
        fprintf(stderr, "the right passphrase did not open the store\n");
        return 1;
    }
    bad |= call(store, "GET", "/memories/secret", NULL, 200, buf, sizeof buf);
    if (!strstr(buf, MARKER)) {
        fprintf(stderr, "the memory is not there after reopening: %s\n", buf);
        bad = 1;
    }
    engram_store_close(store);
    if (bad) {
        return 1;
    }
    printf("encrypted: ok\n");
    return 0;
}
