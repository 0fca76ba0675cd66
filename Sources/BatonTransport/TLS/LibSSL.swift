// SPDX-License-Identifier: GPL-2.0-or-later
import COpenSSL

/// libssl, loaded when the first TLS context is made (`TLSContext.init`), so an idle daemon that no
/// peer reached never maps it (docs/benchmarks.md, idle memory). Every libssl call goes through
/// `LibSSL.api`; nothing links the library.
enum LibSSL {
    private static let loaded: Result<baton_libssl, TransportError> = {
        var error = [CChar](repeating: 0, count: 256)
        guard let table = baton_libssl_load(&error, error.count) else {
            return .failure(.library(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return .success(table.pointee)
    }()

    /// Loads libssl once; throws why it cannot be loaded (the same answer every time).
    static func load() throws(TransportError) -> baton_libssl {
        try loaded.get()
    }

    /// The functions, for code that runs only on a context already made (which loaded them).
    static var api: baton_libssl {
        switch loaded {
        case .success(let table): table
        case .failure(let error): fatalError("libssl used before a TLS context was made: \(error)")
        }
    }
}
