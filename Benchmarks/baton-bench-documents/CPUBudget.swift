// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Glibc

/// The CPU a pull cannot avoid, each part measured on its own in the same run (CPU seconds for
/// `bytes`): what any implementation that decrypts, hashes and stores every byte in user space pays.
/// Their sum against the pull's CPU is Baton's own overhead; against the cores, the ceiling. The parts
/// are also the pipeline's stages, so the largest stage is the critical path on enough cores.
struct CPUBudget {
    /// SHA-256 of the bytes (B checks the digest), from memory.
    var sha256: Double
    /// AES-GCM seal (A) and open (B) of the bytes in 16 KiB records, TLS's record size.
    var aesSeal: Double
    var aesOpen: Double
    /// Reading the snapshot on A (`pread`, 64 KiB, from the page cache).
    var fileRead: Double
    /// Writing it on B (`pwrite` of 64 KiB into a new file beside the inbox, one fsync).
    var fileWrite: Double
    /// Raw TCP on loopback, both threads (measured by the run itself).
    var loopback: Double

    var total: Double { sha256 + aesSeal + aesOpen + fileRead + fileWrite + loopback }

    /// The stages of a pull as it runs (A: read, seal, send; B: receive and open; B: hash; B: write),
    /// the loopback's CPU split evenly between sender and receiver: with a core for each, the largest
    /// is the time per byte.
    var criticalPath: Double { max(fileRead + aesSeal + loopback / 2, aesOpen + loopback / 2, sha256, fileWrite) }

    static func measure(bytes: Int, snapshot: String, scratchDirectory: String, aesKeyBytes: Int, loopback: Double) -> CPUBudget {
        let (seal, open) = aesGCMCPU(bytes: bytes, keyBytes: aesKeyBytes)
        let (read, write) = storageCPU(bytes: bytes, snapshot: snapshot, scratchDirectory: scratchDirectory)
        return CPUBudget(sha256: sha256CPU(bytes: bytes), aesSeal: seal, aesOpen: open, fileRead: read, fileWrite: write, loopback: loopback)
    }

    private static func sha256CPU(bytes: Int) -> Double {
        let block = patternBlock(1 << 20)
        let before = processCPU()
        let hash = SHA256Stream()
        var done = 0
        while done < bytes {
            let count = min(block.count, bytes - done)
            block.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            done += count
        }
        _ = hash.finish()
        return processCPU() - before
    }

    /// Seal, then open, `bytes` in records (one record opened again and again: it stays in cache,
    /// like the record libssl has just read).
    private static func aesGCMCPU(bytes: Int, keyBytes: Int) -> (seal: Double, open: Double) {
        let record = 16_384
        let plaintext = patternBlock(record)
        let header: [UInt8] = [23, 3, 3, 64, 17]  // a TLS 1.3 record header, the AAD
        do {
            let key = try AESGCMKey(randomBytes(keyBytes))
            var nonce = [UInt8](repeating: 0, count: AESGCM.nonceByteCount)
            let records = (bytes + record - 1) / record
            var sealed: (ciphertext: [UInt8], tag: [UInt8]) = ([], [])
            let before = processCPU()
            for sequence in 1...UInt64(records) {
                withUnsafeBytes(of: sequence.bigEndian) { for i in 0..<8 { nonce[4 + i] = $0[i] } }
                sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: header)
            }
            let sealCPU = processCPU() - before
            let openBefore = processCPU()
            for _ in 0..<records {
                _ = try AESGCM.open(key: key, nonce: nonce, ciphertext: sealed.ciphertext, tag: sealed.tag, aad: header)
            }
            return (sealCPU, processCPU() - openBefore)
        } catch {
            preconditionFailure("AES-GCM failed: \(error)")
        }
    }

    /// Reads the snapshot into a buffer, then writes that buffer as often as the snapshot is long.
    private static func storageCPU(bytes: Int, snapshot: String, scratchDirectory: String) -> (read: Double, write: Double) {
        let chunk = 65_536
        let path = scratchDirectory + "/storage-copy"
        let source = open(snapshot, O_RDONLY | O_CLOEXEC)
        let target = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        precondition(source >= 0 && target >= 0, "cannot open \(snapshot) or \(path)")
        defer {
            close(source)
            close(target)
            unlink(path)
        }
        var buffer = [UInt8](repeating: 0, count: chunk)
        let before = processCPU()
        var offset = 0
        while offset < bytes {
            let count = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, min(chunk, bytes - offset), off_t(offset)) }
            precondition(count > 0, "short read of the snapshot")
            offset += count
        }
        let readCPU = processCPU() - before
        let writeBefore = processCPU()
        offset = 0
        while offset < bytes {
            let count = buffer.withUnsafeBytes { pwrite(target, $0.baseAddress, min(chunk, bytes - offset), off_t(offset)) }
            precondition(count > 0, "short write")
            offset += count
        }
        fsync(target)
        return (readCPU, processCPU() - writeBefore)
    }

    private static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

extension CPUBudget {
    func describe(bytes: Int) -> String {
        "SHA-256 \(perGiB(sha256, bytes: bytes)), AES-GCM seal \(perGiB(aesSeal, bytes: bytes)) + open \(perGiB(aesOpen, bytes: bytes)), "
            + "read \(perGiB(fileRead, bytes: bytes)) + write \(perGiB(fileWrite, bytes: bytes)), loopback \(perGiB(loopback, bytes: bytes)): "
            + "\(perGiB(total, bytes: bytes))"
    }
}

/// Seconds this process's threads have spent runnable but waiting for a core (the second field of
/// each /proc/self/task/*/schedstat): time the machine's other load took from the pull, as opposed
/// to time the pull's own stages spent waiting for each other. Threads that ended are not counted.
func runQueueWait() -> Double {
    guard let directory = opendir("/proc/self/task") else { return 0 }
    defer { closedir(directory) }
    var total: UInt64 = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard !name.hasPrefix("."), let file = fopen("/proc/self/task/\(name)/schedstat", "r") else { continue }
        var running: UInt64 = 0, waiting: UInt64 = 0
        if withUnsafeMutablePointer(to: &running, { running in
            withUnsafeMutablePointer(to: &waiting) { waiting in readSchedstat(file, running, waiting) }
        }) { total += waiting }
        fclose(file)
    }
    return Double(total) / 1e9
}

private func readSchedstat(_ file: UnsafeMutablePointer<FILE>, _ running: UnsafeMutablePointer<UInt64>, _ waiting: UnsafeMutablePointer<UInt64>) -> Bool {
    var line = [CChar](repeating: 0, count: 128)
    guard fgets(&line, Int32(line.count), file) != nil else { return false }
    let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).split(separator: " ")
    guard fields.count >= 2, let run = UInt64(fields[0]), let wait = UInt64(fields[1]) else { return false }
    running.pointee = run
    waiting.pointee = wait
    return true
}
