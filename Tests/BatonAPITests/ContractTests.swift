// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus
import Foundation
import Testing

/// The checked-in contract files: dbus/*.xml and docs/dbus-api.md.
enum ContractFiles {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ relativePath: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(relativePath), encoding: .utf8)
    }

    static var interfaceFiles: [String] {
        get throws {
            try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("dbus").path)
                .filter { $0.hasSuffix(".xml") }.sorted()
        }
    }

    /// Every `<interface name="...">` of the XML files, with the file it is in.
    static func declaredInterfaces() throws -> [(file: String, name: String)] {
        var found: [(String, String)] = []
        for file in try interfaceFiles {
            let xml = try text("dbus/" + file)
            var rest = xml[...]
            while let start = rest.range(of: "<interface name=\"") {
                rest = rest[start.upperBound...]
                guard let end = rest.firstIndex(of: "\"") else { break }
                found.append((file, String(rest[..<end])))
                rest = rest[end...]
            }
        }
        return found
    }

    /// Every distinct `prefix` + word in `text`, e.g. org.baton.Error.NotReady.
    static func names(withPrefix prefix: String, in text: String) -> Set<String> {
        var names: Set<String> = []
        var rest = text[...]
        while let start = rest.range(of: prefix) {
            let word = rest[start.upperBound...].prefix { $0.isLetter || $0.isNumber }
            if !word.isEmpty { names.insert(prefix + word) }
            rest = rest[start.upperBound...]
        }
        return names
    }
}

@Suite("BatonAPI: names agree with dbus/*.xml and docs/dbus-api.md")
struct ContractTests {
    @Test func everyInterfaceFileDeclaresOneKnownInterfaceNamedLikeTheFile() throws {
        let declared = try ContractFiles.declaredInterfaces()
        #expect(!declared.isEmpty)
        for (file, name) in declared {
            #expect(file == name + ".xml", "\(file) declares \(name)")
        }
        #expect(Set(declared.map(\.name)) == Set(BatonInterface.all))
        #expect(declared.count == BatonInterface.all.count, "one interface per file")
    }

    @Test func theErrorTableHasExactlyTheDocumentedNames() throws {
        let documented = ContractFiles.names(withPrefix: "org.baton.Error.", in: try ContractFiles.text("docs/dbus-api.md"))
        #expect(documented == Set(BatonErrorName.allCases.map(\.rawValue)))
    }

    @Test func theDocumentedObjectPathsAreTheAPIs() throws {
        let docs = try ContractFiles.text("docs/dbus-api.md")
        for path in [BatonObjectPath.manager, BatonObjectPath.ring, BatonObjectPath.activityPrefix, BatonObjectPath.suggestionPrefix + "/N",
                     BatonObjectPath.pairingSessionPrefix + "/N"] {
            #expect(docs.contains(path), "\(path)")
        }
        for interface in BatonInterface.all {
            #expect(docs.contains(interface), "\(interface)")
        }
    }

    @Test func errorNamesRoundTripThroughDBusError() {
        for name in BatonErrorName.allCases {
            let error = DBusError(name: name, message: "m")
            #expect(error.name == name.rawValue && error.batonName == name)
        }
        #expect(DBusError(name: "org.freedesktop.DBus.Error.ServiceUnknown").batonName == nil)
    }
}
