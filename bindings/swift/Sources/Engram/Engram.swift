// A small Swift wrapper over the C API: open a store, run any API request in-process, close.
//
//     let store = try Engram.Store.open(path: "/tmp/engram")
//     let (status, body) = try store.request("POST", "/memories", body: #"{"content": "Prefers dark roast"}"#)
//     store.close()
//
// A failed C call throws EngramError (its C code and message); API errors (404, 422, ...) are responses with
// that status. One Store may be used from several threads (the C API's guarantee).
import CEngram
import Foundation

/// A failed call of the C API: `code` is its engram_result (ENGRAM_LOCKED, ENGRAM_INVALID_UTF8, ...).
public struct EngramError: Error, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { "engram error \(code): \(message)" }

    static func last(_ code: engram_result) -> EngramError {
        let len = engram_last_error(nil, 0)
        var buf = [CChar](repeating: 0, count: len + 1)
        _ = buf.withUnsafeMutableBufferPointer { engram_last_error($0.baseAddress, $0.count) }
        return EngramError(code: code, message: String(cString: buf))
    }
}

/// An open store. Closed by `close()` or when the last reference goes away.
public final class Store {
    private var handle: OpaquePointer?

    private init(handle: OpaquePointer?) { self.handle = handle }

    /// Opens (or creates) the store in directory `path` with the built-in embedder. Throws EngramError
    /// (ENGRAM_LOCKED when another process has it open).
    public static func open(path: String) throws -> Store {
        var out: OpaquePointer? = nil
        let code = path.withCString { engram_store_open($0, strlen($0), &out) }
        guard code == ENGRAM_OK else { throw EngramError.last(code) }
        return Store(handle: out)
    }

    /// Runs one API request in-process, as the daemon would: `method` (GET, POST, PATCH, PUT, DELETE),
    /// `target` (path with optional query), `body` (JSON). Returns the HTTP-style status and the JSON body.
    public func request(_ method: String, _ target: String, body: String = "") throws -> (status: Int, body: String) {
        var resp: OpaquePointer? = nil
        let code = method.withCString { m in
            target.withCString { t in
                body.withCString { b in
                    b.withMemoryRebound(to: UInt8.self, capacity: strlen(b)) { bytes in
                        engram_request(handle, m, strlen(m), t, strlen(t), bytes, strlen(b), &resp)
                    }
                }
            }
        }
        guard code == ENGRAM_OK else { throw EngramError.last(code) }
        defer { engram_response_free(resp) }
        var len = 0
        let text = engram_response_body(resp, &len).map { String(cString: $0) } ?? ""
        return (Int(engram_response_status(resp)), text)
    }

    /// Closes the store and releases its file; later requests throw. Closing twice is allowed.
    public func close() {
        engram_store_close(handle)
        handle = nil
    }

    deinit { close() }

    /// The library version.
    public static var version: String { String(cString: engram_version()) }
}
