package codec

// Hash64 is weir's partitioning hash: the partition of a key is derived from
// Hash64 of its encoding. It is FNV-1a 64 of b followed by the fmix64
// finalizer of MurmurHash3.
//
// Invariant: Hash64 never changes, not in any version, on any platform.
// Partition assignment, and so where every stored key and every piece of
// state lives, depends on it; changing it silently re-partitions every job.
// TestHash64Golden pins its values. A better hash needs a new function and a
// migration.
//
// Why not the alternatives: hash/maphash is seeded per process, so two
// workers would disagree; FNV-1a alone is stable but mixes poorly into its
// low bits (the lowest bit is the XOR of the lowest bits of the input bytes,
// so "user-1", "user-3", "user-5" would all land in one of two partitions);
// the finalizer spreads every input bit over all output bits, so both h % n
// and h >> (64-k) give even partitions. It needs only the standard library
// and does not allocate.
func Hash64(b []byte) uint64 {
	h := fnv1a64(b)
	// fmix64 (MurmurHash3): a bijection, so it loses nothing FNV kept.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// fnv1a64 is FNV-1a 64, equal to hash/fnv.New64a's sum without its
// allocation.
func fnv1a64(b []byte) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	return h
}
