#include "tokenizer/bpe.hpp"

#include <queue>

namespace kern::tokenizer {

BpeModel::BpeModel(std::vector<TokenId> byte_ids, const std::unordered_map<std::string, TokenId>* whole_words)
    : byte_ids_(std::move(byte_ids)), whole_words_(whole_words) {}

void BpeModel::add_merge(TokenId left, TokenId right, std::uint32_t rank, TokenId result) {
  merges_[key(left, right)] = Merge{rank, result};
}

const BpeModel::Merge* BpeModel::find_merge(TokenId l, TokenId r) const {
  auto it = merges_.find(key(l, r));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (whole_words_) {
    auto it = whole_words_->find(std::string(word));
    if (it != whole_words_->end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  std::string cache_key;
  if (cacheable) {
    cache_key.assign(word);
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(cache_key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t before = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::vector<TokenId> ids(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::move(cache_key), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  struct Symbol {
    TokenId id;
    int prev;
    int next;
    bool alive;
  };
  struct Candidate {
    std::uint32_t rank;
    int pos;
    // std::priority_queue pops the largest: invert so the lowest rank, then leftmost, wins.
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> sym(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    sym[i] = Symbol{byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate> initial;
  initial.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i + 1 < n; ++i) {
    if (const Merge* m = find_merge(sym[i].id, sym[i + 1].id)) initial.push_back({m->rank, i});
  }
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(initial));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    const int right_pos = left.next;
    const Merge* m = find_merge(left.id, sym[right_pos].id);
    if (!m || m->rank != top.rank) continue;  // stale: one side merged since it was queued
    left.id = m->result;
    Symbol& right = sym[right_pos];
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* pm = find_merge(sym[left.prev].id, left.id)) queue.push({pm->rank, left.prev});
    }
    if (left.next >= 0) {
      if (const Merge* nm = find_merge(left.id, sym[left.next].id)) queue.push({nm->rank, top.pos});
    }
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace kern::tokenizer
