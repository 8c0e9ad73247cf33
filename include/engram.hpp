// Engram C++ API: a header-only C++17 wrapper over engram.h.
//
//   engram::Store store = engram::Store::open("/path/to/data");
//   engram::Response r = store.request("POST", "/memories", R"({"content": "Prefers dark roast"})");
//   std::cout << r.status() << " " << r.body() << "\n";
//
// * engram::Store and engram::Response own their C handles (RAII): move-only, freed exactly once.
// * Strings go in as std::string_view (any bytes; the library checks UTF-8) and come out as std::string_view
//   into the response, valid while the Response lives.
// * A failed C call throws engram::Error, carrying the C code (ENGRAM_LOCKED, ENGRAM_INVALID_UTF8, ...) and the
//   library's message. API errors (404, 422, ...) are responses with that status, not exceptions: check
//   Response::ok() or call Response::raise_for_status().
// * One Store may be used from several threads at once (the C API's guarantee); a Response belongs to one
//   thread at a time.

#ifndef ENGRAM_HPP
#define ENGRAM_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engram.h"

namespace engram {

/// A failed call of the C API: `code()` is its engram_result (never ENGRAM_OK), `what()` the library's message.
/// `status()` is the HTTP-style status when the error came from `Response::raise_for_status`, 0 otherwise.
class Error : public std::runtime_error {
 public:
  Error(engram_result code, const std::string& message, std::uint16_t status = 0)
      : std::runtime_error(message), code_(code), status_(status) {}

  engram_result code() const noexcept { return code_; }
  std::uint16_t status() const noexcept { return status_; }

 private:
  engram_result code_;
  std::uint16_t status_;
};

namespace detail {

/// The calling thread's last error message (engram_last_error).
inline std::string last_error() {
  std::size_t len = engram_last_error(nullptr, 0);
  if (len == 0) return std::string();
  std::vector<char> buf(len + 1, '\0');
  engram_last_error(buf.data(), buf.size());
  return std::string(buf.data(), len);
}

inline void check(engram_result code) {
  if (code != ENGRAM_OK) throw Error(code, last_error());
}

/// A pointer the C API accepts for a string_view: never NULL, even for an empty view.
inline const char* ptr(std::string_view s) noexcept { return s.data() != nullptr ? s.data() : ""; }

}  // namespace detail

/// A response of Store::request: status and JSON body. Move-only; frees its C handle once.
class Response {
 public:
  Response() noexcept = default;
  explicit Response(engram_response* raw) noexcept : raw_(raw) {}
  ~Response() { engram_response_free(raw_); }

  Response(Response&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Response& operator=(Response&& other) noexcept {
    if (this != &other) {
      engram_response_free(raw_);
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;

  /// HTTP-style status (200, 404, 422, ...); 0 for an empty (moved-from) response.
  std::uint16_t status() const noexcept { return engram_response_status(raw_); }
  /// True for a 2xx status.
  bool ok() const noexcept { return status() >= 200 && status() < 300; }
  /// The JSON body, valid while this Response lives; empty for an empty response.
  std::string_view body() const noexcept {
    std::size_t len = 0;
    const char* b = engram_response_body(raw_, &len);
    return b != nullptr ? std::string_view(b, len) : std::string_view();
  }
  /// Throws engram::Error (code ENGRAM_NOT_FOUND for 404, ENGRAM_INVALID_INPUT for 4xx, ENGRAM_INTERNAL for
  /// 5xx; the message is the body) unless the status is 2xx; returns *this otherwise.
  const Response& raise_for_status() const {
    const std::uint16_t s = status();
    if (s >= 200 && s < 300) return *this;
    const engram_result code = s == 404   ? ENGRAM_NOT_FOUND
                               : s == 409 ? ENGRAM_CONFLICT
                               : s < 500  ? ENGRAM_INVALID_INPUT
                               : s == 503 ? ENGRAM_UNAVAILABLE
                                          : ENGRAM_INTERNAL;
    throw Error(code, std::string(body()), s);
  }
  /// The C handle, still owned by this Response.
  engram_response* handle() const noexcept { return raw_; }

 private:
  engram_response* raw_ = nullptr;
};

/// An open store. Move-only; closes its C handle once (on destruction or close()).
class Store {
 public:
  /// Opens (or creates) the store in directory `data_dir` with the built-in embedder. Throws engram::Error:
  /// ENGRAM_LOCKED (another process has it open), ENGRAM_INVALID_UTF8, ENGRAM_IO, ENGRAM_CORRUPT.
  static Store open(std::string_view data_dir) {
    engram_store* raw = nullptr;
    detail::check(engram_store_open(detail::ptr(data_dir), data_dir.size(), &raw));
    return Store(raw);
  }

  /// Opens with the sentence-embedding model in `model_dir` (library built with `fastembed`, ONNX Runtime
  /// named by ORT_DYLIB_PATH). Throws as open(), and ENGRAM_UNAVAILABLE when the model cannot be loaded.
  static Store open_with_model(std::string_view data_dir, std::string_view model_dir) {
    engram_store* raw = nullptr;
    detail::check(engram_store_open_with_model(detail::ptr(data_dir), data_dir.size(), detail::ptr(model_dir),
                                               model_dir.size(), &raw));
    return Store(raw);
  }

  /// Opens a store whose vectors come from the caller: `dim` floats each (1..=4096). Throws as open(), and
  /// ENGRAM_INVALID_INPUT for a dimension out of range.
  static Store open_external(std::string_view data_dir, std::size_t dim) {
    engram_store* raw = nullptr;
    detail::check(engram_store_open_external(detail::ptr(data_dir), data_dir.size(), dim, &raw));
    return Store(raw);
  }

  /// Opens a store whose records live in PostgreSQL at `database_url` (library built with `postgres`).
  static Store open_database(std::string_view data_dir, std::string_view database_url) {
    engram_store* raw = nullptr;
    detail::check(engram_store_open_database(detail::ptr(data_dir), data_dir.size(), detail::ptr(database_url),
                                             database_url.size(), &raw));
    return Store(raw);
  }

  /// How open_encrypted() is given the key.
  enum class Key : std::int32_t {
    /// `key` is the passphrase (UTF-8; Argon2id, about 0.15 s).
    Passphrase = ENGRAM_KEY_PASSPHRASE,
    /// `key` is the path of a key file (`engram keygen FILE` writes one).
    File = ENGRAM_KEY_FILE,
    /// The key is in the OS keychain; `key` is ignored.
    Keychain = ENGRAM_KEY_KEYCHAIN,
  };

  /// Opens (or creates) a store encrypted at rest (docs/security.md). `key` stays the caller's: the library
  /// reads it during the call only and keeps no pointer to it. Throws as open(), and ENGRAM_WRONG_KEY when the
  /// key does not open the store (the file is unchanged), ENGRAM_CONFLICT when the store is not encrypted.
  static Store open_encrypted(std::string_view data_dir, Key kind, std::string_view key = {}) {
    engram_store* raw = nullptr;
    const bool keychain = kind == Key::Keychain;
    detail::check(engram_store_open_encrypted(
        detail::ptr(data_dir), data_dir.size(), static_cast<std::int32_t>(kind),
        keychain ? nullptr : reinterpret_cast<const std::uint8_t*>(detail::ptr(key)), keychain ? 0 : key.size(),
        &raw));
    return Store(raw);
  }

  ~Store() { engram_store_close(raw_); }
  Store(Store&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Store& operator=(Store&& other) noexcept {
    if (this != &other) {
      engram_store_close(raw_);
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Runs one API request in-process, as the daemon would: `method` (GET, POST, PATCH, PUT, DELETE), `target`
  /// (path with optional ?query, percent-encoded), `body` (JSON). Thread-safe. Throws engram::Error only when
  /// the call itself fails (a closed or moved-from store: ENGRAM_NULL_PARAMETER; bad UTF-8 in method or
  /// target: ENGRAM_INVALID_UTF8).
  Response request(std::string_view method, std::string_view target, std::string_view body = {}) const {
    engram_response* out = nullptr;
    detail::check(engram_request(raw_, detail::ptr(method), method.size(), detail::ptr(target), target.size(),
                                 reinterpret_cast<const std::uint8_t*>(body.data()), body.size(), &out));
    return Response(out);
  }

  Response get(std::string_view target) const { return request("GET", target); }
  Response post(std::string_view target, std::string_view body) const { return request("POST", target, body); }
  Response patch(std::string_view target, std::string_view body) const { return request("PATCH", target, body); }
  Response del(std::string_view target) const { return request("DELETE", target); }

  /// Closes the store now and releases its file; later requests throw. Closing twice is allowed.
  void close() noexcept { engram_store_close(std::exchange(raw_, nullptr)); }
  /// True until close() (or a move out of this object).
  bool is_open() const noexcept { return raw_ != nullptr; }
  /// The C handle, still owned by this Store.
  engram_store* handle() const noexcept { return raw_; }

 private:
  explicit Store(engram_store* raw) noexcept : raw_(raw) {}
  engram_store* raw_ = nullptr;
};

/// The library version (static).
inline std::string_view version() noexcept { return engram_version(); }

}  // namespace engram

#endif  // ENGRAM_HPP
