// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonReadiness
import BatonService
import BatonStore
import BatonTransport
import Dispatch
import Glibc
import Synchronization

// A document snapshot from committed on A to delivered on B over pinned TLS 1.3 on loopback (the
// daemon's sender and puller, digest checked), against raw TCP on loopback in the same run.
// docs/benchmarks.md explains the method.

struct Options {
    var mebibytes = 1024
    var directory = "/tmp"
    var cutAt = 0.5
    var runs = 5
    /// Only whole pulls, back to back, each with its CPU: for a profiler attached to the process.
    var pullsOnly = false

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--mib":
                guard let value = iterator.next().flatMap(Int.init), value > 0 else { usage() }
                options.mebibytes = value
            case "--directory":
                guard let value = iterator.next() else { usage() }
                options.directory = value
            case "--runs":
                guard let value = iterator.next().flatMap(Int.init), value > 0 else { usage() }
                options.runs = value
            case "--pulls-only":
                options.pullsOnly = true
            case "--cut-at":
                guard let value = iterator.next().flatMap(Double.init), value > 0, value < 1 else { usage() }
                options.cutAt = value
            default: usage()
            }
        }
        return options
    }

    static func usage() -> Never {
        print("usage: baton-bench-documents [--mib N (1024)] [--directory DIR (/tmp)] [--cut-at FRACTION (0.5)] [--runs N (5)] [--pulls-only]")
        exit(2)
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func rate(_ bytes: Int, _ duration: Duration) -> String {
    let perSecond = Double(bytes) / seconds(duration) / 1e9
    return String(Int((perSecond * 100).rounded())).paddedFraction() + " GB/s"
}

extension String {
    /// "123" (hundredths) → "1.23"; with `digits: 1`, "123" (tenths) → "12.3".
    func paddedFraction(digits fractionDigits: Int = 2) -> String {
        let digits = count < fractionDigits + 1 ? String(repeating: "0", count: fractionDigits + 1 - count) + self : self
        return String(digits.dropLast(fractionDigits)) + "." + String(digits.suffix(fractionDigits))
    }
}

/// The 1-minute load average: beside every figure, since on a shared machine it says what the wall times are worth.
func loadAverage() -> String {
    var loads = [Double](repeating: 0, count: 1)
    guard getloadavg(&loads, 1) == 1 else { return "?" }
    return String(Int((loads[0] * 10).rounded())).paddedFraction(digits: 1)
}

/// CPU seconds per GiB, with two decimals.
func perGiB(_ cpu: Double, bytes: Int) -> String {
    String(Int((cpu / (Double(bytes) / Double(1 << 30)) * 100).rounded())).paddedFraction() + " s/GiB"
}

func milliseconds(_ duration: Duration) -> String { String(Int((seconds(duration) * 1000).rounded())) + " ms" }

/// A block of pseudo-random bytes; each block of the file gets its index stamped in, so no two are equal.
func patternBlock(_ size: Int) -> [UInt8] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    return (0..<size).map { _ in
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

func writeSource(path: String, bytes: Int) -> Int32 {
    let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(descriptor >= 0, "cannot create \(path)")
    var block = patternBlock(1 << 20)
    var written = 0
    var index: UInt64 = 0
    while written < bytes {
        withUnsafeBytes(of: index.bigEndian) { stamp in for i in 0..<8 { block[i] = stamp[i] } }
        let count = min(block.count, bytes - written)
        let done = block.withUnsafeBytes { write(descriptor, $0.baseAddress, count) }
        precondition(done == count, "short write")
        written += count
        index += 1
    }
    fsync(descriptor)
    return descriptor
}

/// Raw TCP on loopback: one thread writes `bytes` from a 1 MiB buffer, another reads them.
func rawTCP(bytes: Int) -> Duration {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            precondition(bind(listener, raw, length) == 0 && listen(listener, 1) == 0)
            precondition(getsockname(listener, raw, &length) == 0)
        }
    }
    let port = address.sin_port
    let done = DispatchSemaphore(value: 0)
    let clock = ContinuousClock()
    let start = clock.now
    let reader = Thread {
        let connection = accept(listener, nil, nil)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var received = 0
        while received < bytes {
            let count = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            precondition(count > 0, "raw TCP read failed")
            received += count
        }
        close(connection)
        done.signal()
    }
    reader.start()
    let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_addr.s_addr = inet_addr("127.0.0.1")
    target.sin_port = port
    let connected = withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    precondition(connected == 0, "raw TCP connect failed")
    let block = patternBlock(1 << 20)
    var sent = 0
    while sent < bytes {
        let count = block.withUnsafeBytes { write(client, $0.baseAddress, min($0.count, bytes - sent)) }
        precondition(count > 0, "raw TCP write failed")
        sent += count
    }
    done.wait()
    let elapsed = clock.now - start
    close(client)
    close(listener)
    return elapsed
}

final class Thread: @unchecked Sendable {
    private let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func start() {
        var handle = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&handle, nil, { raw in
            let thread = Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue()
            thread.body()
            return nil
        }, box)
        pthread_detach(handle)
    }
}

/// The source A: a pinned TLS listener serving FetchDocument with the daemon's sender. The first
/// stream stops after `cutAfterChunks` chunks when set (a source that dies half way).
final class Source: Sendable {
    let listener: TLSListener
    let connector: TLSConnector
    let document: AttachedDocument
    let cutOnce: CutOnce
    /// The TLS suite of the last connection.
    let cipherSuite = Mutex("")

    init(document: AttachedDocument, cutAfterChunks: Int?) throws {
        let a = try Ed25519PrivateKey(), b = try Ed25519PrivateKey()
        listener = try TLSListener(identity: a, pins: { PinSet([b.publicKey]) }, host: "127.0.0.1", port: 0)
        connector = try TLSConnector(identity: b, pins: { PinSet([a.publicKey]) })
        self.document = document
        let cutOnce = CutOnce(cutAfterChunks)
        self.cutOnce = cutOnce
        let dispatcher = FrameDispatcher(streamedTypes: [.fetchDocument], streamer: { [document] request, channel in
            let asked = try DocumentRequest(payload: request.payload)
            let cut = cutOnce.take()
            try await DocumentSender.stream(document, for: asked, requestID: request.requestID, on: channel, stillMember: { true }, atMost: cut ?? .max)
            if cut != nil { channel.close(); throw TransportError.closed }
        }) { request, _ in request }
        Task { [listener] in
            while let channel = try? await listener.accept() { Task { _ = await dispatcher.serve(channel) } }
        }
    }

    func connect(_ request: Frame) async throws(TransportError) -> (channel: SecureChannel, reply: Frame) {
        let channel = try await connector.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(5))
        cipherSuite.withLock { $0 = channel.cipherSuite }
        let exchange = FrameExchange(channel: channel)
        _ = try await exchange.request(Frame(type: .hello, requestID: 0, payload: []), timeout: .seconds(5))
        return (channel, try await exchange.request(request, timeout: .seconds(30)))
    }
}

/// The chunk count of the first stream's cut, handed out once.
final class CutOnce: Sendable {
    private let value: Mutex<Int?>
    init(_ value: Int?) { self.value = Mutex(value) }
    func take() -> Int? { value.withLock { value in defer { value = nil }; return value } }
}

/// CPU time of the whole process (both sides, every thread), user and system, in seconds.
func processCPU() -> Double {
    var usage = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

struct PullFigures {
    var total: Duration
    /// CPU seconds both sides spent, so a loaded machine's figures can be compared.
    var cpu: Double
    var firstByte: Duration
    /// The longest pause between two chunks: at a cut, the reconnect, handshake and re-hash of the prefix.
    var longestGap: Duration
    var resumes: Int
    var cipherSuite: String
    /// Seconds the process's threads were runnable but waited for a core during the pull.
    var runQueueWait: Double
}

func pull(from source: Source, into directory: String, maxInterruptions: Int = 2) async throws -> PullFigures {
    let inbox = try DocumentInbox(directory: directory)
    let ids = RequestIDSource(startingAt: 1)
    let puller = DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: TypeHash(value: 1), revision: 1),
                                chunkTimeout: .seconds(30), maxInterruptions: maxInterruptions, makeRequestID: { ids.make() })
    let clock = ContinuousClock()
    let cpuBefore = processCPU()
    let waitBefore = runQueueWait()
    let start = clock.now
    let marks = Mutex<(first: ContinuousClock.Instant?, last: ContinuousClock.Instant?, gap: Duration)>((nil, nil, .zero))
    let pulled = try await puller.pull(connect: source.connect, progress: { received, _ in
        guard received > 0 else { return }
        let now = clock.now
        marks.withLock { marks in
            if marks.first == nil { marks.first = now }
            if let last = marks.last { marks.gap = max(marks.gap, now - last) }
            marks.last = now
        }
    })
    let total = clock.now - start
    let cpu = processCPU() - cpuBefore
    let waited = runQueueWait() - waitBefore
    precondition(pulled.info == source.document.info, "another document arrived")
    let (first, _, gap) = marks.withLock { $0 }
    return PullFigures(total: total, cpu: cpu, firstByte: (first ?? clock.now) - start, longestGap: gap, resumes: pulled.resumes,
                       cipherSuite: source.cipherSuite.withLock { $0 }, runQueueWait: waited)
}

// batond's own global executor, so the pull's tasks run as they do in the daemon.
installQuietGlobalExecutor()
let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
let bytes = options.mebibytes << 20
let root = options.directory + "/baton-bench-documents-\(getpid())"
precondition(mkdir(root, 0o700) == 0, "cannot create \(root)")
defer { _ = system("rm -rf '\(root)'") }
print("document: \(options.mebibytes) MiB in \(root); load average \(loadAverage())")

let appFile = writeSource(path: root + "/app-file", bytes: bytes)
let clock = ContinuousClock()
let commitStart = clock.now
let store = try SnapshotStore(directory: root + "/a-store", perDocumentLimit: UInt64(bytes), perUserLimit: UInt64(bytes))
let stored = try store.commit(from: appFile, uid: getuid(), name: "a1-1")
let commitTime = clock.now - commitStart
close(appFile)
unlink(root + "/app-file")
let info = try DocumentInfo(totalSize: stored.size, digest: stored.digest, mediaType: "application/octet-stream", documentID: "bench")
let document = AttachedDocument(path: stored.path, info: info)
print("commit on A (copy + SHA-256 + fsync): \(milliseconds(commitTime)), \(rate(bytes, commitTime))")

let chunks = (bytes + DocumentChunk.maxDataBytes - 1) / DocumentChunk.maxDataBytes
let cut = max(1, Int(Double(chunks) * options.cutAt))
let keptMiB = (cut * DocumentChunk.maxDataBytes) >> 20

struct RunFigures {
    var raw: Duration
    /// CPU seconds of the raw TCP transfer (both threads).
    var rawCPU: Double
    var whole: PullFigures
    /// The pull cut at `cut` chunks, resumed within the same pull.
    var cutPull: PullFigures
    /// A new pull finding the first `cut` chunks kept by an earlier, interrupted one.
    var fromMiddle: PullFigures
    var budget: CPUBudget
}

/// CPU over wall time: how many cores the pull kept busy on average.
func cores(_ figures: PullFigures) -> String {
    String(Int((figures.cpu / seconds(figures.total) * 10).rounded())).paddedFraction(digits: 1)
}

func percent(_ part: Duration, of whole: Duration) -> Int { Int((seconds(part) / seconds(whole) * 100).rounded()) }

func oneRun(_ index: Int) async throws -> RunFigures {
    let inbox = root + "/b-inbox-\(index)"
    let documentPath = inbox + "/" + info.digest.hexString + ".document"
    let rawCPUBefore = processCPU()
    let raw = rawTCP(bytes: bytes)
    let rawCPU = processCPU() - rawCPUBefore
    let whole = try await pull(from: try Source(document: document, cutAfterChunks: nil), into: inbox)
    unlink(documentPath)
    let budget = CPUBudget.measure(bytes: bytes, snapshot: document.path, scratchDirectory: root,
                                   aesKeyBytes: whole.cipherSuite.contains("AES_256") ? 32 : 16, loopback: rawCPU)
    let cutPull = try await pull(from: try Source(document: document, cutAfterChunks: cut), into: inbox)
    precondition(cutPull.resumes == 1, "the cut did not happen")
    unlink(documentPath)
    // An interrupted pull that gives up at the cut leaves its partial file; the next pull resumes it.
    do {
        _ = try await pull(from: try Source(document: document, cutAfterChunks: cut), into: inbox, maxInterruptions: 0)
        preconditionFailure("the cut did not interrupt the pull")
    } catch DocumentPullError.interrupted {}
    let fromMiddle = try await pull(from: try Source(document: document, cutAfterChunks: nil), into: inbox)
    unlink(documentPath)
    print("run \(index) (load \(loadAverage()), \(whole.cipherSuite)): raw TCP \(milliseconds(raw)) \(rate(bytes, raw)), CPU \(perGiB(rawCPU, bytes: bytes)); "
          + "TLS pull \(milliseconds(whole.total)) \(rate(bytes, whole.total)) "
          + "(\(percent(raw, of: whole.total)) % of raw), CPU \(perGiB(whole.cpu, bytes: bytes)) (\(cores(whole)) cores busy, "
          + "\(milliseconds(.seconds(whole.runQueueWait))) runnable without a core), first byte \(milliseconds(whole.firstByte)); "
          + "cut and resumed \(milliseconds(cutPull.total)) (gap \(milliseconds(cutPull.longestGap))); "
          + "from the middle \(milliseconds(fromMiddle.total))")
    print("  budget: " + budget.describe(bytes: bytes) + "; the pull's own overhead \(perGiB(whole.cpu - budget.total, bytes: bytes))")
    return RunFigures(raw: raw, rawCPU: rawCPU, whole: whole, cutPull: cutPull, fromMiddle: fromMiddle, budget: budget)
}

if options.pullsOnly {
    for index in 1...options.runs {
        let inbox = root + "/b-inbox-\(index)"
        let whole = try await pull(from: try Source(document: document, cutAfterChunks: nil), into: inbox)
        unlink(inbox + "/" + info.digest.hexString + ".document")
        print("pull \(index) (load \(loadAverage())): \(milliseconds(whole.total)) \(rate(bytes, whole.total)), CPU \(perGiB(whole.cpu, bytes: bytes)) (\(cores(whole)) cores busy)")
    }
    _ = system("rm -rf '\(root)'")
    exit(0)
}

var runs: [RunFigures] = []
for index in 1...options.runs { runs.append(try await oneRun(index)) }

/// The median (the lower middle one for an even count).
func median(_ values: [Duration]) -> Duration { values.sorted()[(values.count - 1) / 2] }
func median(_ values: [Double]) -> Double { values.sorted()[(values.count - 1) / 2] }

let raw = median(runs.map(\.raw))
let whole = median(runs.map(\.whole.total))
let ratios = runs.map { seconds($0.raw) / seconds($0.whole.total) }
print("medians of \(runs.count) runs (load average now \(loadAverage()); TLS suite \(runs[0].whole.cipherSuite)):")
print("  raw TCP on loopback: \(milliseconds(raw)), \(rate(bytes, raw)); CPU \(perGiB(median(runs.map(\.rawCPU)), bytes: bytes)) (both threads)")
print("  TLS pull A → B (digest checked, fsync, rename): \(milliseconds(whole)), \(rate(bytes, whole)); "
      + "\(Int((median(ratios) * 100).rounded())) % of raw TCP (median of the per-run ratios)")
print("  CPU of the pull, both sides: \(perGiB(median(runs.map(\.whole.cpu)), bytes: bytes)) on \(cores(runs.map(\.whole).sorted { $0.total < $1.total }[(runs.count - 1) / 2])) cores "
      + "(the median pull; runnable without a core \(milliseconds(.seconds(median(runs.map(\.whole.runQueueWait)))))); "
      + "\(String(Int((median(runs.map { $0.whole.cpu / $0.rawCPU }) * 10).rounded())).paddedFraction(digits: 1)) × raw TCP's (median of the per-run ratios)")
let medianBudget = CPUBudget(sha256: median(runs.map(\.budget.sha256)), aesSeal: median(runs.map(\.budget.aesSeal)), aesOpen: median(runs.map(\.budget.aesOpen)),
                             fileRead: median(runs.map(\.budget.fileRead)), fileWrite: median(runs.map(\.budget.fileWrite)), loopback: median(runs.map(\.budget.loopback)))
let budgetTotal = medianBudget.total
print("  CPU budget (each part measured alone, medians): " + medianBudget.describe(bytes: bytes)
      + "; the pull's own overhead \(perGiB(median(runs.map { $0.whole.cpu - $0.budget.total }), bytes: bytes))")
print("  ceiling on \(ProcessInfoCores.online) cores, perfectly parallel: the budget alone \(rate(bytes, .seconds(budgetTotal / Double(ProcessInfoCores.online)))), "
      + "the pull's CPU \(rate(bytes, .seconds(median(runs.map(\.whole.cpu)) / Double(ProcessInfoCores.online)))); "
      + "on a core per stage, the budget's largest stage (\(perGiB(medianBudget.criticalPath, bytes: bytes))): \(rate(bytes, .seconds(medianBudget.criticalPath)))")
print("  time to first byte: \(milliseconds(median(runs.map(\.whole.firstByte))))")
print("  cut at \(Int(options.cutAt * 100)) % and resumed in the same pull: \(milliseconds(median(runs.map(\.cutPull.total)))); "
      + "longest gap \(milliseconds(median(runs.map(\.cutPull.longestGap)))) (reconnect, handshake, re-hash of the \(keptMiB) MiB kept)")
print("  resume from the middle (\(keptMiB) MiB kept): \(milliseconds(median(runs.map(\.fromMiddle.total)))) against "
      + "\(milliseconds(whole)) from zero")

/// Cores this process may run on.
enum ProcessInfoCores {
    static let online = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
