#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Renders Tests/BatonCoreTests/Vectors/protocol-v1.json as §10 of docs/protocol.md.
Run after regenerating the vectors (see VectorTests.swift)."""
import json, pathlib
root = pathlib.Path(__file__).resolve().parent.parent
v = json.loads((root / "Tests/BatonCoreTests/Vectors/protocol-v1.json").read_text())
k = v["keySchedule"]
out = ["## 10. Test vectors", "",
       "All values hex. The complete set, including every reject case, is `Tests/BatonCoreTests/Vectors/protocol-v1.json`;",
       "`VectorTests` checks it against the code in both directions.", "",
       "### 10.1 Key schedule", "",
       f"- S_a = `{k['secret']}` (bytes 00..1f), the root of generation 1 issued on day a = {k['day']} (§3.1)",
       f"- C = S_(a+1024) = `{k['commitment']}`",
       "- K_tag and K_mdns below are those of day a; K_type is derived from C. Each epoch row gives the day d of",
       "  the epoch and S_d (S_a ratcheted forward), from which that row's tag, mask, seal key and name derive.",
       f"- K_tag = `{k['tagKey']}`", f"- K_type = `{k['typeKey']}`", f"- K_mdns = `{k['mdnsKey']}`", "",
       "| epoch | day d | S_d | tag_e | mask_e | K_seal_e | mDNS instance |", "|---|---|---|---|---|---|---|"]
out += [f"| {e['epoch']} | {e['day']} | `{e['dayKey']}` | `{e['tag']}` | `{e['mask']}` | `{e['sealKey']}` | `{e['mdnsInstance']}` |" for e in k["epochs"]]
out += ["", "| activity type | typeHash |", "|---|---|"]
out += [f"| `{t['activityType']}` | `{t['typeHash']}` |" for t in k["typeHashes"]]
out += ["", "### 10.2 Ring adverts (S_a and C as above; all epochs are of day a)", "",
        "Each advert stands alone; they are not one sender's history (by §4.3 a receiver that accepted",
        "revision 3 rejects revision 16777215 as `staleRevision`). body = typeHash || u24be(revision) || flags.", ""]
for r in v["ringAdverts"]:
    out.append(f"- {r['comment']}: epoch {r['epoch']}, seq {r['sequence']}, typeHash `{r['typeHash']}`, revision {r['revision']}, flags 0x{r['flags']:02x}")
    out.append(f"  - nonce `{r['nonce']}`")
    out.append(f"  - advert `{r['advert']}`")
out += ["", "### 10.3 Pairing adverts", ""]
for p in v["pairingAdverts"]:
    out.append(f"- session `{p['sessionID']}`, tcp {str(p['tcpPublished']).lower()}, psm {p.get('psm', 'none')}, name \"{p['name']}\" → `{p['advert']}`")
out += ["", "### 10.4 Property values", ""]
out += [f"- {x['comment']} → `{x['encoded']}`" for x in v["values"]]
out += ["", "### 10.5 Frames", ""]
out += [f"- type 0x{f['type']:02x}, request id {f['requestID']} → `{f['frame']}`" for f in v["frames"]]
out += ["", "Request id 12 is a first claim of the edit session of `note-1` (base revision 0) and its grant",
        "(revision 1, the digest of the snapshot streamed under request id 10, §6.6); request id 13 is",
        "`Error(documentConflict)`. Request id 14 is a FetchActivityOfVersions asking for versions 1 and 3–5 of",
        "the activity of request id 7, whose version is 7, and the source's answer `Error(versionUnsupported)` (§6.2, §9).",
        "Request ids 15–18 are the clipboard (§6.7): FetchClipboardOffer and its ClipboardOffer (offer id",
        "`0123456789abcdef`, text, 120 s, account `ada`, `text/plain;charset=utf-8` of 5 bytes and `text/html` of 12),",
        "FetchClipboardData of the first from offset 0 answered by one ClipboardData with `hello`, the same from",
        "offset 5 (the end) answered by one empty ClipboardData, and `Error(unknownActivity)` for a copy that changed.",
        "Request ids 19–24 are a copy of files (§6.7 \"Files\"): FetchClipboardOffer and its ClipboardOffer (offer id",
        "`fedcba9876543210`, files, 120 s, account `ada`, one item `application/x-baton-file-list`), FetchClipboardData of",
        "that item answered by one ClipboardData holding the list (`notes ü.txt`, 3 bytes, `text/plain`; `empty`, 0 bytes,",
        "`application/octet-stream`), FetchClipboardFile of file 0 (zero digest, offset 0) answered by a DocumentInfo",
        "(3 bytes, the SHA-256 of \"abc\", `text/plain`, `notes ü.txt`) and one DocumentChunk with \"abc\", the same",
        "resumed from offset 1 with that digest (DocumentInfo again, one DocumentChunk with \"bc\"), file 1 answered by",
        "a DocumentInfo of 0 bytes (the SHA-256 of nothing) and no chunk, and `Error(fileChanged)` for a file that changed."]
p = v["pairing"]
out += ["", "### 10.6 Pairing key agreement", "",
        f"- session id `{p['sessionID']}`",
        f"- initiator X25519 private `{p['initiatorPrivate']}`, public `{p['initiatorPublic']}`, n_I `{p['initiatorNonce']}`",
        f"- responder X25519 private `{p['responderPrivate']}`, public `{p['responderPublic']}`, n_R `{p['responderNonce']}`",
        f"- C = `{p['commitment']}`", f"- H = `{p['transcriptHash']}`", f"- SAS = **{p['sas']}**",
        f"- Z = `{p['sharedSecret']}`", f"- K_IR = `{p['keyInitiatorToResponder']}`", f"- K_RI = `{p['keyResponderToInitiator']}`",
        "", "### 10.7 Rejections", "",
        "`ringAdvert` is a receiver (§4.3) whose ring holds one member with S_a and C of §10.1 (generation 1, stored for day a) and whose",
        "clock is in epoch 2000000; `frame` decodes a byte string that should hold exactly one frame (§6.1) and",
        "then its payload by its type (§6.2, §6.4, §7.3); `value` decodes one top-level property value (§6.4);",
        "`pairingAdvert` decodes the 24 bytes of §5; `roster` decodes a roster (§7.3); `fileList` decodes the item of a",
        "files offer (§6.7 \"Files\"). The text in parentheses",
        "after `malformed` is informative, except where §4–§6 name it (`length`, `reserved`, `name`, `psm`, `body`, and every name §6.5–§6.7 give).", "",
        "| decoder | input | error |", "|---|---|---|"]
out += [f"| {r['decoder']} | `{r['input']}` | {r['error']} |" for r in v["rejects"]]
x = v["pairingExchange"]
out += ["", "### 10.8 A whole pairing exchange", "",
        "Both roles of §7 run against each other with fixed randomness; both users accept, each before it has",
        "heard the other's answer. The X25519 keys and nonces are those of §10.6, so C, H, SAS, Z, K_IR and K_RI",
        "are as there. Identity keys are Ed25519 (RFC 8032) from the given 32-byte seeds; signatures are",
        "deterministic. Frames are listed in the order they were sent (each side's own order is the normative",
        "one, §7.2); for PairSealed the counter and the plaintext (a §6.4 dictionary) are given.", "",
        f"- session id `{x['sessionID']}`, H = `{x['transcriptHash']}`, SAS = **{x['code']}**, second code (§7.1) = **{x['secondCode']}**"]
for role in ("initiator", "responder"):
    q = x[role]
    out += [f"- {role}: name \"{q['name']}\", identity seed `{q['identitySeed']}`, identity key `{q['identityKey']}`,",
            f"  device id `{q['deviceId']}`, secret (root, day {q['day']}) `{q['secret']}`, commitment `{q['commitment']}`, generation {q['generation']}, endpoints "
            + (", ".join(f"`{e}`" for e in q["endpoints"]) or "none (key left out)") + f", roster version {q['rosterVersion']}",
            f"  - signed bytes (§7.2) `{q['signedBytes']}`",
            f"  - signature `{q['signature']}`"]
out += [""]
for f in x["frames"]:
    line = f"- {f['from']} → {f['message']}: `{f['frame']}`"
    if f.get("counter") is not None:
        line += f"\n  - counter {f['counter']}, plaintext `{f['plaintext']}`"
    out.append(line)
out += ["", "### 10.9 Replay outcomes", "",
        "Each line feeds the adverts, in order, to a fresh receiver as in §10.7 (S_a of §10.1, generation 1, clock in",
        "epoch 2000000, all adverts sealed in epoch 2000000 for type `org.example.Reader.reading`) and gives each",
        "advert's outcome (§4.3 step 6).", ""]
for r in v["replays"]:
    out.append(f"- {r['comment']}: " + ", then ".join(f"`{a}` → {o}" for a, o in zip(r["adverts"], r["outcomes"])))
out += ["", "### 10.10 Rosters and RingSync", "",
        "Members are given by their Ed25519 seed (identity key and device id follow from it), name, key of a day",
        "(the generation's root, issued that day), commitment and generation; each entry's signature (§7.3) is by its own seed, an introduction by the introducer's seed,",
        "a removal mark by the remover's seed. Ed25519 signatures are deterministic. A tombstone keeps the removed",
        "device's identity key and introductions and travels as the bytes `record` (§7.3); `digest` is the roster",
        "digest of §7.3 step 7 (Hello carries its first 8 bytes). `members` lists the entries the roster carries;",
        "the ones a cascading mark takes out (§7.3 step 5a) are named after the tombstones.", ""]
for r in v["rosters"]:
    def member_line(m):
        text = (f"\"{m['name']}\" (seed `{m['identitySeed']}`, device id `{m['deviceId']}`, secret `{m['secret']}` of day {m['day']}, "
                f"commitment `{m['commitment']}`, generation {m['generation']}")
        if m.get("introducedBy"):
            text += f", introduced by `{m['introducedBy']}`"
        return text + ")"
    out.append(f"- {r['comment']}: version {r['version']}, members " + "; ".join(member_line(m) for m in r["members"])
               + ", removed " + (", ".join(f"`{d['deviceId']}` (identity key `{d['identityKey']}`) by `{d['removedBy']}`"
                                          + (" (cascading)" if d.get("cascading") else "") for d in r["removed"]) or "none")
               + (", taken out by the cascade: " + ", ".join(f"`{i}`" for i in r["takenOut"]) if r.get("takenOut") else ""))
    for m in r["members"]:
        out.append(f"  - \"{m['name']}\": signed bytes `{m['signedBytes']}`, signature `{m['signature']}`")
        if m.get("introduction"):
            out.append(f"  - \"{m['name']}\" introduction: signed bytes `{m['introductionSignedBytes']}`, signature `{m['introduction']}`")
    for d in r["removed"]:
        out.append(f"  - removal of `{d['deviceId']}`: signed bytes `{d['signedBytes']}`, signature `{d['signature']}`")
        for i in d["introductions"]:
            out.append(f"    - kept introduction by `{i['introducedBy']}`: signature `{i['signature']}`")
        out.append(f"    - tombstone record `{d['record']}`")
    out.append(f"  - roster `{r['roster']}`")
    out.append(f"  - RingSync, request id {r['ringSyncRequestID']}: `{r['ringSyncFrame']}`")
    out.append(f"  - digest `{r['digest']}`")
out += ["", "Merges (§7.3) by the member named by `me` (device ids as above: laptop `b4c1ece898ece24e24e601232f95c6a1`,",
        "Schreibtisch-Ü `d2f381d7b0b5f1d39239f186fdee4dd3`; the others' seeds: tablet `99`…, phone `bb`…, old `dd`…,",
        "thief `11`…, each byte repeated 32 times, keys of day 20833). The receiver holds `local`, merges each",
        "`received` roster in the order given (the first from the pairing peer `anchor` when one is named), and",
        "holds `result` with `digest`, or refuses the first merge that fails with `error` and keeps `local`.",
        "`newly removed` lists the device ids that became removed (each makes the receiver re-key, §7.4), `members`",
        "the members after the merge (the entries of `result` less those a cascade takes out, §7.3 step 5a). Merging",
        "the received rosters in any other order, or each twice, gives the same digest.", ""]
for m in v["rosterMerges"]:
    out.append(f"- {m['comment']}: me `{m['me']}`" + (f", anchor `{m['anchor']}`" if m.get("anchor") else ""))
    out.append(f"  - local `{m['local']}`")
    for index, received in enumerate(m["received"]):
        out.append(f"  - received ({index + 1}) `{received}`")
    if m.get("error"):
        out.append(f"  - error: {m['error']}")
    else:
        out.append(f"  - result `{m['result']}`")
        out.append(f"  - digest `{m['digest']}`, newly removed " + (", ".join(f"`{i}`" for i in m["newlyRemoved"]) or "none"))
        if m.get("members") is not None:
            out.append("  - members " + ", ".join(f"`{i}`" for i in m["members"]))
out += ["", "Keys of one member at a receiver holding the same generation (§3.1, §7.3): the receiver stores",
        "`stored` and receives `received` on its day D; it keeps `result`. Each key is S_d of day d with its",
        "commitment C.", ""]
for m in v["keyMerges"]:
    out.append(f"- {m['comment']}: generation {m['generation']}, D = {m['receiverDay']}")
    for label in ("stored", "received", "result"):
        k = m[label]
        out.append(f"  - {label}: `{k['secret']}` of day {k['day']}, C `{k['commitment']}`")
out += ["", "### 10.11 Channel identity proofs", "",
        "§8.1 proofs of one identity (given by its Ed25519 seed) for a fixed exporter value X, both roles. A proof",
        "checked with the other role's label, or under another key, must fail.", ""]
for c in v["channelProofs"]:
    out.append(f"- {c['role']}: seed `{c['identitySeed']}`, identity key `{c['identityKey']}`, X `{c['exporter']}`")
    out.append(f"  - signed bytes `{c['signedBytes']}`")
    out.append(f"  - proof `{c['proof']}`")
x = v["tlsExporter"]
out += ["", f"The exporter of §8.1 for a {x['hash']} suite, label `{x['label']}`, empty context (S' is the Derive-Secret",
        "of the label, X the 32 bytes of the exporter). The `exporter_master_secret` is that of a real TLS 1.3 session",
        "(TLS_AES_128_GCM_SHA256, from OpenSSL's key log), and X is what `SSL_export_keying_material` returned in it:", "",
        f"- exporter_master_secret `{x['exporterMasterSecret']}`",
        f"- S' `{x['secret']}`",
        f"- X `{x['exporter']}`"]
out += ["", "### 10.12 Independent check", "",
        "`scripts/spec-check.py` (Python 3 and python3-cryptography) implements §3–§7.3 (with the day chain of §3.1) and the identity proof of §8.1 from this document alone,",
        "without the Swift code, and checks every vector in `protocol-v1.json`: it recomputes keys, tags, masks,",
        "type hashes, mDNS names, sealed adverts, pairing adverts, values, frames, C, H, SAS and the pairing keys",
        "from their inputs, runs both pairing roles over the exchange of §10.8 (seals each message from its",
        "inputs and compares the bytes, opens each one, verifies and recomputes the identity signatures), checks that the document stream of §10.5 hashes to its",
        "DocumentInfo's digest (§6.5) and that the edit-session grant of §10.5 names that snapshot (§6.6), that the",
        "FetchActivityOfVersions of §10.5 leaves out the version of the activity answered and is answered",
        "versionUnsupported (§6.2), that the ClipboardData of §10.5 follow §6.7 for the offer and the request they",
        "answer (from the asked offset, each after the one before, total the offered size, ending at it, empty only there),",
        "that the list of the files offer of §10.5 decodes to the files it names and that each FetchClipboardFile is",
        "answered by a DocumentInfo describing the listed file (every stream from offset 0 hashing to its digest, the",
        "resumed one continuing those bytes) or by `Error(fileChanged)`,",
        "reads the clipboard kind of each ring advert (§4.1 bits 4–5), builds",
        "the rosters of §10.10 from their members (making and verifying every signature) and computes their digests,",
        "runs the merge of §7.3 over each merge of §10.10 (in every delivery order, each roster twice), keeps the key §3.1 and §7.3",
        "say for each key merge of §10.10, makes and verifies the",
        "channel identity proofs of §10.11 in both roles, computes the TLS exporter of §10.11 from its",
        "exporter_master_secret, replays §10.9, decodes and re-encodes every encoded item, and",
        "expects each rejection's error.",
        "`scripts/test` runs it; a failure there means this text and the code disagree."]
spec = root / "docs/protocol.md"
s = spec.read_text()
s = s[: s.index("## 10. Test vectors")] + "\n".join(out) + "\n"
spec.write_text(s)
