// C++ quickstart: open a store, add memories, search, share the store between threads, handle errors.
// Build: g++ -std=c++17 -Iinclude examples/cpp/quickstart.cpp -Ltarget/debug -lengram -o quickstart
// (the library built with `cargo build --features ffi`). Run: ./quickstart /tmp/engram-cpp
#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "engram.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
    ++failures;
  }
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/engram-cpp-quickstart";
  std::cout << "engram " << engram::version() << "\n";
  try {
    engram::Store store = engram::Store::open(dir);

    engram::Response created =
        store.post("/memories", R"({"id": "cpp-1", "content": "Prefers dark roast coffee, no sugar", "labels": ["cpp"]})");
    expect(created.status() == 200 || created.status() == 201, "POST /memories status");
    expect(contains(created.body(), "\"cpp-1\""), "the memory id comes back");

    engram::Response found = store.post("/memories/search", R"({"query": "coffee", "limit": 3})");
    found.raise_for_status();
    expect(contains(found.body(), "dark roast"), "search finds the memory");
    std::cout << "search: " << found.body().substr(0, 80) << "...\n";

    // API errors are responses, not exceptions, until raise_for_status().
    engram::Response missing = store.get("/memories/no-such-id");
    std::cout << "GET /memories/no-such-id -> " << missing.status() << "\n";
    expect(missing.status() == 404 && !missing.ok(), "404 for a missing memory");
    try {
      missing.raise_for_status();
      expect(false, "raise_for_status throws on 404");
    } catch (const engram::Error& e) {
      expect(e.code() == ENGRAM_NOT_FOUND && e.status() == 404, "404 maps to ENGRAM_NOT_FOUND");
    }

    // One store, four threads writing and searching at once.
    std::atomic<int> ok_writes{0};
    std::atomic<int> ok_searches{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&store, &ok_writes, &ok_searches, t] {
        for (int i = 0; i < 10; ++i) {
          std::string body = R"({"content": "thread )" + std::to_string(t) + " note " + std::to_string(i) +
                             R"( about the ferry timetable"})";
          if (store.post("/memories", body).ok()) ++ok_writes;
          engram::Response r = store.post("/memories/search", R"({"query": "ferry timetable", "limit": 5})");
          if (r.ok() && contains(r.body(), "ferry")) ++ok_searches;
        }
      });
    }
    for (std::thread& w : workers) w.join();
    expect(ok_writes == 40 && ok_searches == 40, "40 writes and 40 searches from 4 threads");

    // Moving transfers ownership; the moved-from store refuses requests with an exception.
    engram::Store moved = std::move(store);
    try {
      (void)store.get("/health");  // NOLINT(bugprone-use-after-move): the point of the check
      expect(false, "a moved-from store throws");
    } catch (const engram::Error& e) {
      expect(e.code() == ENGRAM_NULL_PARAMETER, "moved-from store: ENGRAM_NULL_PARAMETER");
    }
    engram::Response listed = moved.get("/memories?limit=1");
    expect(contains(listed.body(), "\"total\""), "listing answers");

    // Only one opener at a time: a second open of the same directory is ENGRAM_LOCKED.
    try {
      engram::Store second = engram::Store::open(dir);
      expect(false, "a second open throws");
    } catch (const engram::Error& e) {
      std::cout << "second open -> code " << e.code() << " (" << e.what() << ")\n";
      expect(e.code() == ENGRAM_LOCKED, "second open: ENGRAM_LOCKED");
    }
#ifdef ENGRAM_PLANT_LEAK
    // For the sanitizer test that must fail: a response taken from the C API and never freed.
    engram_response* leaked = nullptr;
    engram_request(moved.handle(), "GET", 3, "/health", 7, nullptr, 0, &leaked);
    leaked = nullptr;
#endif
    moved.close();
    expect(!moved.is_open(), "closed");
    engram::Store reopened = engram::Store::open(dir);
    expect(contains(reopened.get("/memories/cpp-1").body(), "dark roast"), "reopened store keeps the memory");
    reopened.close();

    // A store encrypted at rest: made with a passphrase, reopened with it; a wrong one is ENGRAM_WRONG_KEY.
    const std::string secret_dir = dir + "-encrypted";
    {
      engram::Store enc = engram::Store::open_encrypted(secret_dir, engram::Store::Key::Passphrase, "hunter2 hunter2");
      expect(enc.post("/memories", R"({"id": "enc-1", "content": "The spare key is under the blue pot"})").ok(),
             "write to the encrypted store");
      expect(contains(enc.get("/health").body(), R"("encrypted":true)"), "/health says encrypted");
    }
    try {
      engram::Store wrong = engram::Store::open_encrypted(secret_dir, engram::Store::Key::Passphrase, "hunter3");
      expect(false, "a wrong passphrase throws");
    } catch (const engram::Error& e) {
      std::cout << "wrong passphrase -> code " << e.code() << "\n";
      expect(e.code() == ENGRAM_WRONG_KEY, "wrong passphrase: ENGRAM_WRONG_KEY");
    }
    engram::Store enc = engram::Store::open_encrypted(secret_dir, engram::Store::Key::Passphrase, "hunter2 hunter2");
    engram::Response hit = enc.post("/memories/search", R"({"query": "spare key", "limit": 3})");
    expect(contains(hit.body(), "blue pot"), "search in the reopened encrypted store");
  } catch (const engram::Error& e) {
    std::cerr << "engram error " << e.code() << ": " << e.what() << "\n";
    return 1;
  }
  if (failures != 0) return 1;
  std::cout << "cpp quickstart: ok\n";
  return 0;
}
