// SPDX-License-Identifier: GPL-2.0-or-later
// baton-continue-bench: accept → Continue delivered to the handler, two rings on loopback in one
// process (real TLS 1.3 with pinned keys, real transfer), 4 KiB userInfo; only the advert trigger
// is an in-memory fake radio. Cold (fetch on accept) and prefetched. See docs/benchmarks.md.
//
//   swift run -c release baton-continue-bench [--iterations N]
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonService
import BatonStore
import Foundation
import Synchronization

/// The radio, in memory: a fake. Records the advert on the air; `hear` plays a report in.
final class FakeAirRadio: RadioPort {
    private let air = Mutex<[UInt8]?>(nil)
    private let stream: AsyncStream<RadioEvent>
    private let feed: AsyncStream<RadioEvent>.Continuation
    init() { (stream, feed) = AsyncStream.makeStream() }
    func events() -> AsyncStream<RadioEvent> { stream }
    func advertise(companyID: UInt16, data: [UInt8], connectable: Bool) async throws(RadioError) { air.withLock { $0 = data } }
    func stopAdvertising() async { air.withLock { $0 = nil } }
    func startScanning() async throws(RadioError) { feed.yield(.stateChanged(.ready)) }
    func stopScanning() async {}
    /// No L2CAP: the transfer runs over TCP on loopback.
    func adapterAddress() async -> RadioAdapterAddress? { nil }
    var onAir: [UInt8]? { air.withLock { $0 } }
    func hear(_ data: [UInt8]) {
        feed.yield(.report(AdvertisementReport(address: try! BluetoothAddress("C0:00:00:00:00:01"), addressType: .random, rssi: -50, txPower: nil,
                                               manufacturerData: [Protocol.defaultCompanyID: data])))
    }
}

/// The activities side in memory: one current activity; a handler that accepts every version and
/// every WillContinue and notes when it got an activity (a fake). No documents, no edit sessions.
final class FakeHandlerActivities: TransferActivities, ContinuationActivities {
    let type: String
    let current = Mutex<(ActivityID, ActivityRecord)?>(nil)
    let delivered = Mutex<ContinuousClock.Instant?>(nil)
    init(type: String) { self.type = type }
    func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? { current.withLock { $0 } }
    func notifyWasContinued(_ id: ActivityID, device: String) async {}
    func documentForTransfer(uid: UInt32) async -> AttachedDocument? { nil }
    func currentActivityForTransfer(uid: UInt32) async -> ActivityID? { nil }
    func editSessionsForTransfer() async -> EditSessions? { nil }
    func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]? { nil }
    func allHandledTypes() async -> Set<String> { [type] }
    func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool { true }
    func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]? { nil }
    func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]? { nil }
    func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer { .accepted(HandlerTicket(uid: uid, type: type)) }
    func deliver(activity: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        delivered.withLock { $0 = .now }
        return .delivered
    }
    func deliver(activity: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: activity, from: device, to: ticket.uid)
    }
    func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: activity, from: device, to: ticket.uid)
    }
    func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {}
    func documentInbox(uid: UInt32) async -> DocumentInbox? { nil }
    func editSessionsForContinue() async -> EditSessions? { nil }
    func holdsReceivedDocument(digest: [UInt8]) async -> Bool { false }
    func editSessionsLost(_ lost: [LostEditSession]) async {}
}

/// The suggestions, in memory: a fake board.
final class FakeBoard: SuggestionBoard {
    let shown = Mutex<[String: ShownSuggestion]>([:])
    func offer(_ shown: ShownSuggestion) async throws { self.shown.withLock { $0[shown.path] = shown } }
    func withdraw(_ shown: ShownSuggestion) async { self.shown.withLock { $0[shown.path] = nil } }
    func titleKnown(_ shown: ShownSuggestion, title: String) async {}
    func documentProgress(_ progress: DocumentProgress, to caller: String) async {}
    var only: ShownSuggestion? { shown.withLock { $0.count == 1 ? $0.values.first : nil } }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

struct Node {
    let ring: RingService
    let pairing: PairingService
    let radio: FakeAirRadio
    let transfer: TransferService
    let continuation: ContinuationService
    let activities: FakeHandlerActivities
    let board: FakeBoard

    static func start(_ directory: String, name: String, type: String, prefetch: Bool) async throws -> Node {
        let radio = FakeAirRadio()
        let ring = try RingService(store: RingStore(directory: StateDirectory(path: "\(directory)/\(name)")), radio: radio, clock: SystemWallClock(),
                                   configuration: .init(deviceName: name, listenHost: "127.0.0.1"), log: { _ in })
        await ring.start()
        let pairing = PairingService(ring: ring, discovery: nil, clock: SystemWallClock(), log: { _ in })
        let activities = FakeHandlerActivities(type: type)
        let transfer = try await TransferService.start(ring: ring, activities: activities,
                                                       configuration: .init(listenHost: "127.0.0.1", bluetooth: false), log: { _ in })
        let board = FakeBoard()
        let continuation = ContinuationService(ring: ring, transfer: transfer, activities: activities, board: board,
                                               configuration: .init(prefetchAfter: prefetch ? .zero : nil), log: { _ in })
        await continuation.start()
        return Node(ring: ring, pairing: pairing, radio: radio, transfer: transfer, continuation: continuation, activities: activities, board: board)
    }

    func stop() async {
        await continuation.stop()
        await transfer.stop()
        await pairing.stop()
        await ring.stop()
    }
}

func milliseconds(_ duration: Duration) -> Double {
    let parts = duration.components
    return Double(parts.seconds) * 1000 + Double(parts.attoseconds) / 1e15
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func waitFor(_ condition: () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while !(await condition()) {
        guard ContinuousClock.now < deadline else { throw BenchFailure(description: "timed out") }
        try await Task.sleep(for: .microseconds(200))
    }
}

/// One series: each iteration publishes a new revision on alpha, beta hears it, (waits for the
/// prefetch), then accept → delivered is timed.
func series(prefetch: Bool, iterations: Int, settle: Duration, directory: String) async throws -> [Double] {
    let type = "org.example.Reader.reading"
    let a = try await Node.start(directory, name: "alpha-\(prefetch)", type: type, prefetch: false)
    let b = try await Node.start(directory, name: "beta-\(prefetch)", type: type, prefetch: prefetch)
    try await LoopbackPairing.pair(a.pairing, b.pairing, uid: getuid())
    let userInfo: [String: PropertyValue] = ["state": .bytes([UInt8](repeating: 0x5A, count: 4096))]
    var samples: [Double] = []
    for index in 0..<(iterations + 5) {
        let record = try ActivityRecord(activityType: type, title: "Dune, page \(index)", userInfo: userInfo, webpageURL: nil, version: 1)
        a.activities.current.withLock { $0 = (ActivityID(uid: getuid(), serial: 1), record) }
        try await a.ring.radio.publish(record, uid: getuid())
        guard let advert = a.radio.onAir else { throw BenchFailure(description: "nothing on the air") }
        b.radio.hear(advert)
        try await waitFor { b.board.only?.activityType == type }
        guard let suggestion = b.board.only else { continue }
        if prefetch { try await waitFor { await b.continuation.isPrefetched(suggestion.path) } }
        // --settle-ms: a person's click comes long after the suggestion, when the process has gone
        // idle (its threads asleep); a settle before the timed take measures that case too.
        if settle > .zero { try await Task.sleep(for: settle) }
        let start = ContinuousClock.now
        let outcome = try await b.continuation.take(suggestion.path, uid: getuid())
        guard outcome == "delivered", let delivered = b.activities.delivered.withLock({ $0 }) else {
            throw BenchFailure(description: "outcome \(outcome)")
        }
        // The first five warm up (TLS contexts, caches) and are not counted.
        if index >= 5 { samples.append(milliseconds(delivered - start)) }
        try await waitFor { b.board.only == nil }
    }
    await a.stop()
    await b.stop()
    return samples.sorted()
}

var iterations = 100
var settle = Duration.zero
var only: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--iterations", let value = arguments.popFirst().flatMap({ Int($0) }), value > 0 {
        iterations = value
    } else if argument == "--settle-ms", let value = arguments.popFirst().flatMap({ Int($0) }), value >= 0 {
        settle = .milliseconds(value)
    } else if argument == "--only", let value = arguments.popFirst(), ["cold", "prefetched"].contains(value) {
        only = value
    } else {
        print("usage: baton-continue-bench [--iterations N] [--settle-ms MS] [--only cold|prefetched]")
        exit(2)
    }
}
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-continue-bench-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: directory) }
print("accept -> Continue delivered to the handler, 4 KiB userInfo, loopback TLS, \(iterations) iterations each")
for (name, prefetch) in [("cold", false), ("prefetched", true)] where only == nil || only == name {
    let samples = try await series(prefetch: prefetch, iterations: iterations, settle: settle, directory: directory)
    print(String(format: "%-11@ p50 %7.3f ms   p95 %7.3f ms   min %7.3f ms   max %7.3f ms",
                 name, percentile(samples, 0.5), percentile(samples, 0.95), samples.first ?? 0, samples.last ?? 0))
}
