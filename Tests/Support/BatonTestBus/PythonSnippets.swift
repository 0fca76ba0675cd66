// SPDX-License-Identifier: GPL-2.0-or-later
/// Python (python3-dbus) that sends dictionaries with duplicate keys, which dbus-python's own
/// Dictionary cannot: `Pairs([("k", 1), ("k", 2)])` marshals as an a{sv} with both entries.
/// Interpolated into the test clients of BatonDBusTests and BatonServiceTests.
public let pythonDuplicateKeyPairs = #"""
class Key(str):
    pass

class Pairs(dict):
    """Iterated as keys, then indexed by each key: every Key carries its own value, so equal keys survive."""
    def __init__(self, pairs):
        super().__init__(pairs)
        self.ordered = []
        for k, v in pairs:
            key = Key(k)
            key.value = v
            self.ordered.append(key)
    def __iter__(self): return iter(self.ordered)
    def __len__(self): return len(self.ordered)
    def __getitem__(self, key): return key.value
    def keys(self): return list(self.ordered)
    def items(self): return [(k, k.value) for k in self.ordered]
"""#
