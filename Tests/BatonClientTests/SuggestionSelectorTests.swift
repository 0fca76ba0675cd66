// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCommandLine
import BatonTestBus
import Testing

/// Issue 26: `baton continue` takes the member's name (or device id) as well as the object path.
@Suite("baton continue NAME")
struct SuggestionSelectorTests {
    let laptop = SuggestionSelector.Candidate(path: "/org/baton/suggestion/1", device: "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
                                              deviceName: "laptop", activityType: "org.example.Reader.page")
    let desk = SuggestionSelector.Candidate(path: "/org/baton/suggestion/2", device: "ffeeddccbbaa99887766554433221100",
                                            deviceName: "Desk", activityType: "org.example.Editor.file")

    func resolve(_ argument: String, _ candidates: [SuggestionSelector.Candidate]) throws -> Result<String, SuggestionSelector.Refusal> {
        try SuggestionSelector(parsing: argument).resolve(among: candidates)
    }

    @Test func aNameAnIdOrAPathPicksTheOneSuggestion() throws {
        #expect(try resolve("laptop", [laptop, desk]) == .success(laptop.path))
        #expect(try resolve("desk", [laptop, desk]) == .success(desk.path))   // case ignored only when nothing matches exactly
        #expect(try resolve(desk.device, [laptop, desk]) == .success(desk.path))
        #expect(try resolve("/org/baton/suggestion/7", []) == .success("/org/baton/suggestion/7"))
    }

    @Test func anExactNameWinsOverOneThatDiffersInCase() throws {
        var lower = desk
        lower.deviceName = "desk"
        lower.path = "/org/baton/suggestion/3"
        #expect(try resolve("Desk", [desk, lower]) == .success(desk.path))
        #expect(try resolve("desk", [desk, lower]) == .success(lower.path))
    }

    @Test func namesakesAreRefusedWithEachIdAndPath() throws {
        var twin = laptop
        twin.device = "00112233445566778899aabbccddeeff"
        twin.path = "/org/baton/suggestion/4"
        guard case .failure(let refusal) = try resolve("laptop", [laptop, twin, desk]) else {
            Issue.record("namesakes were not refused")
            return
        }
        #expect(refusal.message.contains(laptop.device) && refusal.message.contains(twin.device), "\(refusal.message)")
        #expect(refusal.message.contains(laptop.path) && refusal.message.contains(twin.path), "\(refusal.message)")
        // Either one can still be named by its id.
        #expect(try resolve(twin.device, [laptop, twin, desk]) == .success(twin.path))
    }

    @Test func anUnknownMemberSaysWhoOffersSomething() throws {
        guard case .failure(let refusal) = try resolve("phone", [laptop, desk]) else {
            Issue.record("an unknown member was resolved")
            return
        }
        #expect(refusal.message.hasPrefix("no suggestion from phone: suggestions now come from Desk, laptop"), "\(refusal.message)")
        guard case .failure(let none) = try resolve("phone", []) else { return }
        #expect(none.message.contains("there are no suggestions now") && none.message.contains("`baton suggestions`"), "\(none.message)")
    }

    @Test func aBadPathOrAnEmptyNameIsAUsageError() {
        #expect(throws: UsageError.self) { try SuggestionSelector(parsing: "/a//b") }
        #expect(throws: UsageError.self) { try SuggestionSelector(parsing: "") }
        #expect(throws: UsageError.self) { try SuggestionSelector(parsing: "/org/baton/suggestion-1") }
    }

    @Test("baton continue NAME against batond with no suggestion: one sentence, exit 1, no D-Bus text")
    func continueByNameWithoutSuggestions() async throws {
        try await withDaemon { daemon in
            let result = try await BatonTool(daemon: daemon).run(["continue", "laptop"])
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.contains("no suggestion from laptop: there are no suggestions now"), "\(result.stderr)")
            #expect(!result.stderr.contains("org.freedesktop"), "\(result.stderr)")
        }
    }
}
