#!/usr/bin/env python3
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
       f"- S = `{k['secret']}` (bytes 00..1f), generation 1",
       f"- K_tag = `{k['tagKey']}`", f"- K_seal = `{k['sealKey']}`", f"- K_type = `{k['typeKey']}`", f"- K_mdns = `{k['mdnsKey']}`", "",
       "| epoch | tag_e | mask_e | mDNS instance |", "|---|---|---|---|"]
out += [f"| {e['epoch']} | `{e['tag']}` | `{e['mask']}` | `{e['mdnsInstance']}` |" for e in k["epochs"]]
out += ["", "| activity type | typeHash |", "|---|---|"]
out += [f"| `{t['activityType']}` | `{t['typeHash']}` |" for t in k["typeHashes"]]
out += ["", "### 10.2 Ring adverts (S as above)", "",
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
p = v["pairing"]
out += ["", "### 10.6 Pairing key agreement", "",
        f"- session id `{p['sessionID']}`",
        f"- initiator X25519 private `{p['initiatorPrivate']}`, public `{p['initiatorPublic']}`, n_I `{p['initiatorNonce']}`",
        f"- responder X25519 private `{p['responderPrivate']}`, public `{p['responderPublic']}`, n_R `{p['responderNonce']}`",
        f"- C = `{p['commitment']}`", f"- H = `{p['transcriptHash']}`", f"- SAS = **{p['sas']}**",
        f"- Z = `{p['sharedSecret']}`", f"- K_IR = `{p['keyInitiatorToResponder']}`", f"- K_RI = `{p['keyResponderToInitiator']}`",
        "", "### 10.7 Rejections", "",
        "`ringAdvert` is a receiver (§4.3) whose ring holds one member with S of §10.1 (generation 1) and whose",
        "clock is in epoch 2000000; `frame` decodes a byte string that should hold exactly one frame (§6.1);",
        "`value` decodes one top-level property value (§6.4). The text in parentheses after `malformed` is",
        "informative, except where §4–§6 name it (`length`, `reserved`, `name`, `psm`, `body`).", "",
        "| decoder | input | error |", "|---|---|---|"]
out += [f"| {r['decoder']} | `{r['input']}` | {r['error']} |" for r in v["rejects"]]
out += ["", "### 10.8 Independent check", "",
        "`scripts/spec-check.py` (Python 3 and python3-cryptography) implements §3–§7.2 from this document alone,",
        "without the Swift code, and checks every vector in `protocol-v1.json`: it recomputes keys, tags, masks,",
        "type hashes, mDNS names, sealed adverts, pairing adverts, values, frames, C, H, SAS and the pairing keys",
        "from their inputs, decodes and re-encodes every encoded item, and expects each rejection's error.",
        "`scripts/test` runs it; a failure there means this text and the code disagree."]
spec = root / "docs/protocol.md"
s = spec.read_text()
s = s[: s.index("## 10. Test vectors")] + "\n".join(out) + "\n"
spec.write_text(s)
