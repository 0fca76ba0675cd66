// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Glibc
import Testing
@testable import BatonService

/// The bus ends of a continued document: what the handler gets and what Activity1 shows.
@Suite("BatonServiceTests: a continued document reaches the handler as a read-only descriptor", .serialized)
struct DocumentHandoverTests {
    @Test func theHandlerGetsAReadOnlyDescriptorAndTheDescriptionButNoPath() async throws {
        try await withService { fixture in
            let recorder = CallRecorder()
            let app = try fixture.connect()
            defer { app.close() }
            let handler = try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
                recorder.append(call)
                return call.member == "WillContinue" ? [.boolean(true)] : []
            }
            try await app.export([handler], at: "/drawing")
            _ = try await app.manager("RegisterHandler", [.objectPath("/drawing"), .stringArray(["org.example.Drawing.editing"])])

            let bytes = Array("%PDF-1.7 two pages".utf8)
            let inbox = try DocumentInbox(directory: fixture.stateDirectory + "/inbox-test")
            let path = inbox.documentPath(digest: SHA256.hash(bytes))
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let info = try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes), mediaType: "application/pdf", documentID: "plan-2")
            let pulled = PulledDocument(path: path, info: info, resumes: 0, resumedBytes: 0)
            let record = try ActivityRecord(activityType: "org.example.Drawing.editing", title: "Plan", userInfo: ["page": .integer(2)],
                                            webpageURL: nil, version: 1)
            guard case .accepted(let ticket) = await fixture.handlers.willContinue(type: record.activityType, from: "Laptop", uid: getuid()) else {
                Issue.record("the handler did not accept")
                return
            }
            #expect(await fixture.handlers.deliver(activity: record, document: pulled, from: "Laptop", to: ticket) == .delivered)
            let continueCall = try #require(recorder.calls.last)
            let document = try #require(continueCall.arguments[3].asDictionary?["Document"]?.asDictionary)
            #expect(document["Id"] == .string("plan-2") && document["MediaType"] == .string("application/pdf"))
            #expect(document["Size"] == .uint64(UInt64(bytes.count)) && document["Digest"] == .string(info.digest.hexString))
            #expect(Set(document.keys) == ["Fd", "Id", "MediaType", "Size", "Digest"], "no path is handed out")
            let descriptor = try #require(document["Fd"]?.unixFDValue)
            defer { close(descriptor) }
            #expect(fcntl(descriptor, F_GETFL) & O_ACCMODE == O_RDONLY)
            var read = [UInt8](repeating: 0, count: 64)
            let count = read.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 64, 0) }
            #expect(Array(read[0..<max(0, count)]) == bytes)
            #expect(write(descriptor, "x", 1) == -1, "the daemon's copy cannot be changed through it")
        }
    }

    @Test func activityDocumentDescribesTheSnapshotAndNothingShowsItsPath() async throws {
        try await withService { fixture in
            let store = try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20)
            await fixture.service.useDocuments(store)
            let client = fixture.client
            let path = try await client.createActivity(title: "Plan")
            #expect(try await client.property(path, "Document").asDictionary?.isEmpty == true)
            let content = Array("two pages, one comment".utf8)
            let file = fixture.bus.directory.appendingPathComponent("plan.pdf").path
            try Data(content).write(to: URL(fileURLWithPath: file))
            let descriptor = open(file, O_RDONLY)
            defer { close(descriptor) }
            _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("application/pdf"), .string("plan-2")])
            let document = try #require(try await client.property(path, "Document").asDictionary)
            #expect(document == ["Id": .string("plan-2"), "MediaType": .string("application/pdf"), "Size": .uint64(UInt64(content.count)),
                                 "Digest": .string(SHA256.hash(content).hexString)])
            // Every property and the payload that would leave the machine: no store path anywhere.
            let all = try await fixture.client.call(destination: "org.baton", path: path, interface: "org.freedesktop.DBus.Properties",
                                                    method: "GetAll", arguments: [.string("org.baton.Activity1")])
            let payload = try await client.activity(path, "GetPayload")
            #expect(!"\(all)\(payload)".contains(fixture.stateDirectory))
        }
    }
}
