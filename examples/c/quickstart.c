/* Engram C quickstart: open a store, create a memory, search, read it back, handle an error; a conversation
 * searched with its context.
 * Build (after `cargo build --release --features ffi`):
 *   cc examples/c/quickstart.c -Iinclude -Ltarget/release -lengram -Wl,-rpath,$PWD/target/release -o quickstart
 *   ./quickstart /tmp/engram-demo
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
        snprintf(out, out_len, "%s", json);
    }
    engram_response_free(resp);
    if (status != want_status) {
        fprintf(stderr, "expected status %u, got %u\n", want_status, status);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "engram-demo";
    engram_store *store = NULL;
    if (engram_store_open(dir, strlen(dir), &store) != ENGRAM_OK) {
        char msg[256];
        engram_last_error(msg, sizeof msg);
        fprintf(stderr, "open failed: %s\n", msg);
        return 1;
    }
    printf("engram %s\n", engram_version());
    /* A model folder that does not exist is a clear error, not a crash, and opens nothing. */
    engram_store *none = NULL;
    const char *no_model = "/nonexistent/engram-model";
    if (engram_store_open_with_model(dir, strlen(dir), no_model, strlen(no_model), &none) != ENGRAM_UNAVAILABLE ||
        none != NULL) {
        fprintf(stderr, "expected ENGRAM_UNAVAILABLE for a missing model folder\n");
        return 1;
    } else {
        char msg[512];
        engram_last_error(msg, sizeof msg);
        printf("missing model: %.60s...\n", msg);
    }
    char buf[8192];
    int bad = 0;
    bad |= call(store, "POST", "/memories",
                "{\"id\":\"c-demo\",\"content\":\"Caroline went to the LGBTQ support group on 7 May 2023\","
                "\"labels\":[\"people\"],\"importance\":0.8}", 200, buf, sizeof buf);
    const char *action = strstr(buf, "\"action\":\"created\"")     ? "created"
                         : strstr(buf, "\"action\":\"unchanged\"") ? "unchanged"
                                                                      : "other";
    printf("action: %s\n", action);
    bad |= strcmp(action, "other") == 0;
    bad |= call(store, "POST", "/memories/search", "{\"query\":\"support group\",\"limit\":3}", 200, buf, sizeof buf);
    bad |= strstr(buf, "\"id\":\"c-demo\"") == NULL;
    bad |= call(store, "GET", "/memories/c-demo", NULL, 200, buf, sizeof buf);
    bad |= strstr(buf, "\"labels\":[\"people\"]") == NULL;
    /* The built-in static model embeds with nothing configured: semantic search, not degraded. */
    bad |= call(store, "GET", "/health", NULL, 200, buf, sizeof buf);
    bad |= strstr(buf, "\"mode\":\"local-static\"") == NULL || strstr(buf, "\"degraded\":false") == NULL;
    bad |= call(store, "GET", "/memories/no-such-id", NULL, 404, buf, sizeof buf);
    bad |= call(store, "POST", "/memories", "{\"content\":\"\"}", 422, buf, sizeof buf);

    /* A conversation stored turn by turn (`analysis: per-message`): a hit comes with the exchange around it. */
    engram_response *probe = NULL;
    if (engram_request(store, "GET", 3, "/threads/c-talk", 15, NULL, 0, &probe) == ENGRAM_OK &&
        engram_response_status(probe) == 404) {
        bad |= call(store, "POST", "/threads",
                    "{\"thread_id\":\"c-talk\",\"title\":\"holiday\",\"metadata\":{\"analysis\":\"per-message\"},"
                    "\"messages\":[{\"role\":\"user\",\"content\":\"Where did you go on holiday?\"},"
                    "{\"role\":\"assistant\",\"content\":\"We went to Lisbon and ate pastries.\"},"
                    "{\"role\":\"user\",\"content\":\"That sounds lovely.\"}]}",
                    200, buf, sizeof buf);
    }
    engram_response_free(probe);
    bad |= call(store, "POST", "/memories/search",
                "{\"query\":\"pastries\",\"limit\":1,\"include_context\":true,\"context_window\":1}", 200, buf,
                sizeof buf);
    bad |= strstr(buf, "\"content\":\"Where did you go on holiday?\"") == NULL;
    bad |= strstr(buf, "\"content\":\"That sounds lovely.\"") == NULL;
    bad |= strstr(buf, "\"is_hit\":true") == NULL;

    /* Agent tools (the MCP tool set) through the same call: memory_search answers the tool's result object. */
    bad |= call(store, "POST", "/agent/tools/call",
                "{\"name\":\"memory_search\",\"arguments\":{\"query\":\"support group\",\"limit\":3}}", 200, buf,
                sizeof buf);
    bad |= strstr(buf, "\"memory_id\":\"c-demo\"") == NULL;
    bad |= call(store, "POST", "/agent/tools/call", "{\"name\":\"no_such_tool\",\"arguments\":{}}", 404, buf, sizeof buf);

    /* Invalid UTF-8 in the target is refused with a code, not a crash. */
    engram_response *resp = NULL;
    const char bad_target[] = {'/', (char)0xff, (char)0xfe};
    engram_result rc = engram_request(store, "GET", 3, bad_target, sizeof bad_target, NULL, 0, &resp);
    printf("invalid UTF-8 target -> %d (resp %s)\n", rc, resp ? "set" : "untouched");
    bad |= rc != ENGRAM_INVALID_UTF8 || resp != NULL;
    bad |= engram_request(NULL, "GET", 3, "/health", 7, NULL, 0, &resp) != ENGRAM_NULL_PARAMETER;

    engram_store_close(store);
    engram_store_close(NULL);
    engram_response_free(NULL);
    if (bad) {
        fprintf(stderr, "quickstart: FAILED\n");
        return 1;
    }
    printf("quickstart: ok\n");
    return 0;
}
