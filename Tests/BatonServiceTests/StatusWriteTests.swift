// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Synchronization
import Testing
@testable import BatonService

@Suite("BatonServiceTests: status writes on the publish path (issue 12)")
struct StatusWriteTests {
    /// Only the advert counters may precede the advert: the status file follows it, written once.
    @Test func statusIsWrittenOnceAndAfterTheAdvert() async throws {
        let statusPath = Mutex<String?>(nil)
        let atAdvert = Mutex<[DaemonStatus]>([])
        var options = FixtureOptions()
        options.publisher = FakePublisher(onPublish: {
            guard let path = statusPath.withLock({ $0 }), let data = FileManager.default.contents(atPath: path),
                  let status = try? JSONDecoder().decode(DaemonStatus.self, from: data) else { return }
            atAdvert.withLock { $0.append(status) }
        })
        try await withService(options) { fixture in
            statusPath.withLock { $0 = fixture.statusFilePath }
            let path = try await fixture.client.createActivity(title: "first")
            for round in 1...3 {
                let writesBefore = await fixture.service.statusWrites
                _ = try await fixture.client.activity(path, "BecomeCurrent")
                #expect(try await eventually { try await fixture.client.property(path, "Status") == .string("published") })
                #expect(await fixture.service.statusWrites == writesBefore + 1, "round \(round)")
                let written = try JSONDecoder().decode(DaemonStatus.self, from: Data(contentsOf: URL(fileURLWithPath: fixture.statusFilePath)))
                #expect(written.activities.map(\.status) == ["published"])
                _ = try await fixture.client.activity(path, "ResignCurrent")
            }
            // When the radio got the advert, the file still said what it said before BecomeCurrent.
            let seen = atAdvert.withLock { $0 }
            #expect(seen.count >= 3)
            #expect(seen.allSatisfy { $0.activities.map(\.status) == ["idle"] && $0.activities.map(\.current) == [false] })
        }
    }
}
