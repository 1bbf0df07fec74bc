// philox_batch: sixteen Philox blocks side by side, in one set of AVX-512 registers or two of
// AVX2, or one after another with philox4x32_10 where the build has neither (core/cpu/philox_batch.h
// says why).
#include "core/cpu/philox_batch.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/philox.h"

namespace sg::cpu {

namespace {

// The 64-bit counters' low and high halves, one array each: words 0 and 1 of every block before
// the first round (words 2 and 3 start at 0).
void write_counters(PhiloxBatch& batch, uint64_t first_counter) {
  for (int l = 0; l < kPhiloxBatch; ++l) {
    const uint64_t counter = first_counter + static_cast<uint64_t>(l);
    batch.word[0][l] = static_cast<uint32_t>(counter);
    batch.word[1][l] = static_cast<uint32_t>(counter >> 32);
  }
}

}  // namespace

#if defined(__AVX512F__)

// GCC 12's avx512fintrin.h passes an uninitialised variable as the unused pass-through operand of
// the unmasked shifts and multiplies (GCC bug 105593, fixed in 13), which -Wuninitialized reports
// wherever they are inlined. The code below reads no uninitialised value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// The four counter words of the 16 blocks, one block per 32-bit lane.
struct SixteenBlocks {
  __m512i c0, c1, c2, c3;
};

// The high and the low 32 bits of a * m in every lane, as in the AVX2 version below: even lanes
// by one _mm512_mul_epu32, odd lanes by a second after a shift, the halves blended back.
__m512i multiply_high_low(__m512i a, __m512i m, __m512i* low) {
  constexpr __mmask16 kOdd = 0xAAAA;
  const __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *low = _mm512_mask_blend_epi32(kOdd, even, _mm512_slli_epi64(odd, 32));
  return _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(even, 32), odd);
}

// One round of philox4x32_10 (its constants; tests/test_factory.cpp holds the two to the same bits).
void philox_round(SixteenBlocks& c, __m512i key0, __m512i key1) {
  const __m512i kMul0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i kMul1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m512i low0, low1;
  const __m512i high0 = multiply_high_low(c.c0, kMul0, &low0);
  const __m512i high1 = multiply_high_low(c.c2, kMul1, &low1);
  c.c0 = _mm512_xor_si512(_mm512_xor_si512(high1, c.c1), key0);
  c.c1 = low1;
  c.c2 = _mm512_xor_si512(_mm512_xor_si512(high0, c.c3), key1);
  c.c3 = low0;
}

}  // namespace

PhiloxBatch philox_batch(uint64_t seed, uint64_t first_counter) {
  static_assert(kPhiloxBatch == 16, "one set of 16 AVX-512 lanes");
  PhiloxBatch batch;
  write_counters(batch, first_counter);
  SixteenBlocks c{_mm512_loadu_si512(batch.word[0]), _mm512_loadu_si512(batch.word[1]), _mm512_setzero_si512(),
                  _mm512_setzero_si512()};
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    philox_round(c, _mm512_set1_epi32(static_cast<int>(key0)), _mm512_set1_epi32(static_cast<int>(key1)));
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  _mm512_storeu_si512(batch.word[0], c.c0);
  _mm512_storeu_si512(batch.word[1], c.c1);
  _mm512_storeu_si512(batch.word[2], c.c2);
  _mm512_storeu_si512(batch.word[3], c.c3);
  return batch;
}

#pragma GCC diagnostic pop

#elif defined(__AVX2__)

namespace {

// The four counter words of 8 blocks, one block per 32-bit lane.
struct EightBlocks {
  __m256i c0, c1, c2, c3;
};

// The high and the low 32 bits of a * m in every lane. _mm256_mul_epu32 multiplies the even
// lanes into 64-bit products; shifting a right by 32 brings the odd lanes there for a second one.
__m256i multiply_high_low(__m256i a, __m256i m, __m256i* low) {
  const __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0b10101010);
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0b10101010);
}

// One round of philox4x32_10 (its constants; tests/test_factory.cpp holds the two to the same bits),
// lane by lane.
void philox_round(EightBlocks& c, __m256i key0, __m256i key1) {
  const __m256i kMul0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i kMul1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m256i low0, low1;
  const __m256i high0 = multiply_high_low(c.c0, kMul0, &low0);
  const __m256i high1 = multiply_high_low(c.c2, kMul1, &low1);
  c.c0 = _mm256_xor_si256(_mm256_xor_si256(high1, c.c1), key0);
  c.c1 = low1;
  c.c2 = _mm256_xor_si256(_mm256_xor_si256(high0, c.c3), key1);
  c.c3 = low0;
}

}  // namespace

PhiloxBatch philox_batch(uint64_t seed, uint64_t first_counter) {
  static_assert(kPhiloxBatch == 16, "two sets of 8 AVX2 lanes");
  PhiloxBatch batch;
  write_counters(batch, first_counter);
  auto load = [](const uint32_t* words) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words)); };
  EightBlocks a{load(batch.word[0]), load(batch.word[1]), _mm256_setzero_si256(), _mm256_setzero_si256()};
  EightBlocks b{load(batch.word[0] + 8), load(batch.word[1] + 8), _mm256_setzero_si256(), _mm256_setzero_si256()};
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    // Two independent sets of lanes: one's multiplies run while the other's wait.
    const __m256i k0 = _mm256_set1_epi32(static_cast<int>(key0)), k1 = _mm256_set1_epi32(static_cast<int>(key1));
    philox_round(a, k0, k1);
    philox_round(b, k0, k1);
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  const __m256i words[4][2] = {{a.c0, b.c0}, {a.c1, b.c1}, {a.c2, b.c2}, {a.c3, b.c3}};
  for (int w = 0; w < 4; ++w)
    for (int half = 0; half < 2; ++half)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(batch.word[w] + 8 * half), words[w][half]);
  return batch;
}

#else

PhiloxBatch philox_batch(uint64_t seed, uint64_t first_counter) {
  PhiloxBatch batch;
  for (int l = 0; l < kPhiloxBatch; ++l) {
    const PhiloxBlock block = philox4x32_10(seed, first_counter + static_cast<uint64_t>(l));
    for (int w = 0; w < 4; ++w) batch.word[w][l] = block.word[w];
  }
  return batch;
}

#endif

}  // namespace sg::cpu
