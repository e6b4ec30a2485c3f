// BuildAutomaton: GrammarIr -> per-rule NFA (Thompson construction, small non-recursive rules
// inlined) -> per-rule DFA by subset construction over byte classes and call symbols, then
// pruning of states that can never complete and a left-recursion check.
#include "grammar/automaton.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace m3::grammar {

size_t Automaton::memory_bytes() const {
  return next.size() * sizeof(StateId) + is_final.size() * 3 + calls.size() * 8 +
         call_begin.size() * 4;
}

namespace {

struct SetHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct NfaState {
  std::vector<int32_t> eps;
  std::vector<std::pair<int32_t, int32_t>> sets;  // (byte set index, target)
  std::vector<std::pair<RuleId, int32_t>> calls;  // (callee rule, target)
};

class Builder {
 public:
  Builder(const GrammarIr& ir, const CompileLimits& limits) : ir_(ir), limits_(limits) {}

  Automaton Build() {
    const auto& rules = ir_.rules();
    Require(ir_.root >= 0, ErrorCode::kInvalidArgument, "grammar has no root rule");
    for (size_t r = 0; r < rules.size(); ++r)
      Require(rules[r].body >= 0, ErrorCode::kInvalidArgument,
              "rule '" + rules[r].name + "' is referenced but never defined");
    FindRecursive();
    ComputeSizes();
    // Automaton rules: the root and every rule called rather than inlined, found as the NFAs
    // are built.
    std::vector<RuleId> order = {ir_.root};
    std::vector<int> index(rules.size(), -1);
    index[static_cast<size_t>(ir_.root)] = 0;
    std::vector<std::pair<int32_t, int32_t>> fragments;  // per automaton rule: start, end
    for (size_t k = 0; k < order.size(); ++k) {
      RuleId r = order[k];
      int32_t start = NewState(), end = NewState();
      BuildExpr(rules[static_cast<size_t>(r)].body, start, end, 0);
      fragments.push_back({start, end});
      for (RuleId callee : pending_calls_) {
        if (index[static_cast<size_t>(callee)] < 0) {
          index[static_cast<size_t>(callee)] = static_cast<int>(order.size());
          order.push_back(callee);
        }
      }
      pending_calls_.clear();
    }
    ComputeByteClasses();
    Automaton a;
    std::copy(std::begin(byte_class_), std::end(byte_class_), std::begin(a.byte_class));
    a.num_classes = num_classes_;
    a.rule_start.assign(rules.size(), -1);
    for (const Rule& r : rules) a.rule_names.push_back(r.name);
    // Subset construction per automaton rule; calls are resolved to start states afterwards.
    struct PendingCall {
      StateId from;
      RuleId callee;
      StateId ret;
    };
    std::vector<PendingCall> call_list;
    std::vector<std::vector<StateId>> next_rows;
    for (size_t k = 0; k < order.size(); ++k) {
      RuleId r = order[k];
      int32_t nstart = fragments[k].first, nend = fragments[k].second;
      std::unordered_map<std::vector<int32_t>, StateId, SetHash> ids;
      std::vector<std::vector<int32_t>> todo;
      auto intern = [&](std::vector<int32_t> set) -> StateId {
        auto it = ids.find(set);
        if (it != ids.end()) return it->second;
        StateId id = static_cast<StateId>(a.is_final.size());
        Require(a.is_final.size() < limits_.max_states, ErrorCode::kTooLarge,
                "grammar too large: more than " + std::to_string(limits_.max_states) +
                    " automaton states (CompileLimits::max_states)");
        a.is_final.push_back(std::binary_search(set.begin(), set.end(), nend) ? 1 : 0);
        a.rule_of.push_back(r);
        next_rows.emplace_back(static_cast<size_t>(num_classes_), -1);
        ids.emplace(set, id);
        todo.push_back(std::move(set));
        return id;
      };
      StateId start = intern(Closure({nstart}));
      a.rule_start[static_cast<size_t>(r)] = start;
      std::vector<std::pair<std::vector<int32_t>, StateId>> work;
      while (!todo.empty()) {
        std::vector<int32_t> set = std::move(todo.back());
        todo.pop_back();
        StateId from = ids[set];
        CheckTime();
        // Targets per byte class, gathered in one pass over the set's edges.
        std::vector<std::vector<int32_t>>& by_class = by_class_;
        by_class.assign(static_cast<size_t>(num_classes_), {});
        for (int32_t s : set)
          for (auto [set_index, t] : nfa_[static_cast<size_t>(s)].sets)
            for (int c : set_classes_[static_cast<size_t>(set_index)])
              by_class[static_cast<size_t>(c)].push_back(t);
        for (int c = 0; c < num_classes_; ++c) {
          if (by_class[static_cast<size_t>(c)].empty()) continue;
          StateId to = intern(Closure(std::move(by_class[static_cast<size_t>(c)])));
          next_rows[static_cast<size_t>(from)][static_cast<size_t>(c)] = to;
        }
        std::map<RuleId, std::vector<int32_t>> by_callee;
        for (int32_t s : set)
          for (auto [callee, t] : nfa_[static_cast<size_t>(s)].calls)
            by_callee[callee].push_back(t);
        for (auto& [callee, targets] : by_callee)
          call_list.push_back({from, callee, intern(Closure(std::move(targets)))});
      }
    }
    a.root_start = a.rule_start[static_cast<size_t>(ir_.root)];
    size_t n = a.is_final.size();
    a.next.resize(n * static_cast<size_t>(num_classes_));
    for (size_t s = 0; s < n; ++s)
      std::copy(next_rows[s].begin(), next_rows[s].end(),
                a.next.begin() + static_cast<ptrdiff_t>(s * static_cast<size_t>(num_classes_)));
    std::stable_sort(call_list.begin(), call_list.end(),
                     [](const PendingCall& x, const PendingCall& y) { return x.from < y.from; });
    // Productive states: those from which the rule can complete.
    std::vector<uint8_t> productive(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        if (productive[s]) continue;
        bool p = a.is_final[s] != 0;
        for (int c = 0; c < num_classes_ && !p; ++c) {
          StateId t = a.next[s * static_cast<size_t>(num_classes_) + static_cast<size_t>(c)];
          p = t >= 0 && productive[static_cast<size_t>(t)];
        }
        if (p) {
          productive[s] = 1;
          changed = true;
        }
      }
      for (const PendingCall& c : call_list) {
        StateId callee_start = a.rule_start[static_cast<size_t>(c.callee)];
        if (!productive[static_cast<size_t>(c.from)] && productive[static_cast<size_t>(c.ret)] &&
            productive[static_cast<size_t>(callee_start)]) {
          productive[static_cast<size_t>(c.from)] = 1;
          changed = true;
        }
      }
    }
    Require(productive[static_cast<size_t>(a.root_start)] != 0, ErrorCode::kInvalidArgument,
            "grammar matches no text at all (rule '" + rules[static_cast<size_t>(ir_.root)].name +
                "' can never complete)");
    for (auto& t : a.next)
      if (t >= 0 && !productive[static_cast<size_t>(t)]) t = -1;
    a.call_begin.assign(n + 1, 0);
    for (const PendingCall& c : call_list) {
      StateId callee_start = a.rule_start[static_cast<size_t>(c.callee)];
      if (!productive[static_cast<size_t>(c.ret)] || !productive[static_cast<size_t>(callee_start)])
        continue;
      a.calls.push_back({callee_start, c.ret});
      a.call_begin[static_cast<size_t>(c.from) + 1]++;
    }
    for (size_t s = 0; s < n; ++s) a.call_begin[s + 1] += a.call_begin[s];
    a.has_bytes.assign(n, 0);
    for (size_t s = 0; s < n; ++s)
      for (int c = 0; c < num_classes_; ++c)
        if (a.next[s * static_cast<size_t>(num_classes_) + static_cast<size_t>(c)] >= 0)
          a.has_bytes[s] = 1;
    CheckLeftRecursion(a, order);
    ComputeFollow(a);
    return a;
  }

 private:
  void CheckTime() {
    if (++ticks_ % 256 != 0) return;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started_)
                  .count();
    Require(ms <= limits_.max_compile_ms, ErrorCode::kDeadlineExceeded,
            "grammar took longer than " + std::to_string(limits_.max_compile_ms) +
                " ms to compile (CompileLimits::max_compile_ms)");
  }

  int32_t NewState() {
    Require(nfa_.size() < limits_.max_states * 4, ErrorCode::kTooLarge,
            "grammar too large: more than " + std::to_string(limits_.max_states * 4) +
                " automaton states before determinization (CompileLimits::max_states)");
    nfa_.emplace_back();
    return static_cast<int32_t>(nfa_.size() - 1);
  }

  int32_t SetIndex(const ByteSet& s) {
    auto key = s.to_string();
    auto it = set_ids_.find(key);
    if (it != set_ids_.end()) return it->second;
    sets_.push_back(s);
    int32_t id = static_cast<int32_t>(sets_.size() - 1);
    set_ids_.emplace(std::move(key), id);
    return id;
  }

  void FindRecursive() {
    const auto& rules = ir_.rules();
    size_t n = rules.size();
    refs_.assign(n, {});
    ref_count_.assign(n, 0);
    for (size_t r = 0; r < n; ++r) {
      std::vector<ExprId> stack = {rules[r].body};
      std::set<RuleId> seen;
      while (!stack.empty()) {
        const Expr& e = ir_.expr(stack.back());
        stack.pop_back();
        if (e.kind == ExprKind::kRuleRef) {
          if (seen.insert(e.rule).second) refs_[r].push_back(e.rule);
          ref_count_[static_cast<size_t>(e.rule)]++;
        }
        for (ExprId c : e.children) stack.push_back(c);
      }
    }
    // Tarjan's strongly connected components, iteratively.
    recursive_.assign(n, 0);
    std::vector<int> idx(n, -1), low(n, 0), on(n, 0);
    std::vector<int> st;
    int counter = 0;
    for (size_t root = 0; root < n; ++root) {
      if (idx[root] >= 0) continue;
      std::vector<std::pair<int, size_t>> call = {{static_cast<int>(root), 0}};
      idx[root] = low[root] = counter++;
      st.push_back(static_cast<int>(root));
      on[root] = 1;
      while (!call.empty()) {
        auto& [v, i] = call.back();
        auto vs = static_cast<size_t>(v);
        if (i < refs_[vs].size()) {
          auto w = static_cast<size_t>(refs_[vs][i++]);
          if (idx[w] < 0) {
            idx[w] = low[w] = counter++;
            st.push_back(static_cast<int>(w));
            on[w] = 1;
            call.push_back({static_cast<int>(w), 0});
          } else if (on[w]) {
            low[vs] = std::min(low[vs], idx[w]);
          }
          continue;
        }
        if (low[vs] == idx[vs]) {
          std::vector<int> comp;
          int w;
          do {
            w = st.back();
            st.pop_back();
            on[static_cast<size_t>(w)] = 0;
            comp.push_back(w);
          } while (w != v);
          bool self = std::find(refs_[vs].begin(), refs_[vs].end(), v) != refs_[vs].end();
          if (comp.size() > 1 || self)
            for (int c : comp) recursive_[static_cast<size_t>(c)] = 1;
        }
        int done = v;
        call.pop_back();
        if (!call.empty()) {
          auto p = static_cast<size_t>(call.back().first);
          low[p] = std::min(low[p], low[static_cast<size_t>(done)]);
        }
      }
    }
  }

  // The NFA states an expression expands to with every inlinable rule inlined (saturating).
  double ExprSize(ExprId id) {
    const Expr& e = ir_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return 1;
      case ExprKind::kBytes:
        return static_cast<double>(e.bytes.size()) + 1;
      case ExprKind::kByteSet:
        return 2;
      case ExprKind::kRuleRef:
        return Inlined(e.rule) ? rule_size_[static_cast<size_t>(e.rule)] : 2;
      case ExprKind::kSeq:
      case ExprKind::kChoice: {
        double s = 2;
        for (ExprId c : e.children) s += ExprSize(c);
        return s;
      }
      case ExprKind::kRepeat:
        return (ExprSize(e.children[0]) + 2) * (e.max < 0 ? e.min + 1 : e.max) + 2;
    }
    return 1;
  }

  void ComputeSizes() {
    const auto& rules = ir_.rules();
    rule_size_.assign(rules.size(), -1);
    // Non-recursive rules form a DAG: sizes bottom-up by memoized recursion over refs.
    std::function<void(size_t)> visit = [&](size_t r) {
      if (rule_size_[r] >= 0) return;
      rule_size_[r] = 0;
      for (RuleId c : refs_[r])
        if (!recursive_[static_cast<size_t>(c)]) visit(static_cast<size_t>(c));
      rule_size_[r] = recursive_[r] ? 2 : ExprSize(rules[r].body);
    };
    for (size_t r = 0; r < rules.size(); ++r) visit(r);
  }

  bool Inlined(RuleId r) const {
    auto rs = static_cast<size_t>(r);
    if (recursive_[rs] || r == ir_.root) return false;
    return ref_count_[rs] <= 1 || rule_size_[rs] <= kInlineStates;
  }

  void BuildExpr(ExprId id, int32_t from, int32_t to, int depth) {
    Require(depth < 4 * limits_.max_depth + 64, ErrorCode::kTooLarge,
            "grammar nested too deeply (CompileLimits::max_depth)");
    CheckTime();
    const Expr& e = ir_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        nfa_[static_cast<size_t>(from)].eps.push_back(to);
        return;
      case ExprKind::kBytes: {
        int32_t cur = from;
        for (size_t i = 0; i < e.bytes.size(); ++i) {
          int32_t nxt = i + 1 == e.bytes.size() ? to : NewState();
          ByteSet s;
          s.set(static_cast<uint8_t>(e.bytes[i]));
          nfa_[static_cast<size_t>(cur)].sets.push_back({SetIndex(s), nxt});
          cur = nxt;
        }
        return;
      }
      case ExprKind::kByteSet:
        if (e.set.any()) nfa_[static_cast<size_t>(from)].sets.push_back({SetIndex(e.set), to});
        return;
      case ExprKind::kRuleRef:
        if (Inlined(e.rule)) {
          BuildExpr(ir_.rules()[static_cast<size_t>(e.rule)].body, from, to, depth + 1);
        } else {
          nfa_[static_cast<size_t>(from)].calls.push_back({e.rule, to});
          pending_calls_.push_back(e.rule);
        }
        return;
      case ExprKind::kSeq: {
        int32_t cur = from;
        for (size_t i = 0; i < e.children.size(); ++i) {
          int32_t nxt = i + 1 == e.children.size() ? to : NewState();
          BuildExpr(e.children[i], cur, nxt, depth + 1);
          cur = nxt;
        }
        return;
      }
      case ExprKind::kChoice:
        for (ExprId c : e.children) {
          int32_t a = NewState(), b = NewState();
          nfa_[static_cast<size_t>(from)].eps.push_back(a);
          BuildExpr(c, a, b, depth + 1);
          nfa_[static_cast<size_t>(b)].eps.push_back(to);
        }
        return;
      case ExprKind::kRepeat: {
        int32_t cur = from;
        for (int i = 0; i < e.min; ++i) {
          int32_t nxt = NewState();
          BuildExpr(e.children[0], cur, nxt, depth + 1);
          cur = nxt;
        }
        if (e.max < 0) {
          int32_t loop = NewState();
          nfa_[static_cast<size_t>(cur)].eps.push_back(loop);
          int32_t body_end = NewState();
          BuildExpr(e.children[0], loop, body_end, depth + 1);
          nfa_[static_cast<size_t>(body_end)].eps.push_back(loop);
          nfa_[static_cast<size_t>(loop)].eps.push_back(to);
        } else {
          for (int i = e.min; i < e.max; ++i) {
            nfa_[static_cast<size_t>(cur)].eps.push_back(to);
            int32_t nxt = i + 1 == e.max ? to : NewState();
            BuildExpr(e.children[0], cur, nxt, depth + 1);
            cur = nxt;
          }
          if (cur != to) nfa_[static_cast<size_t>(cur)].eps.push_back(to);
        }
        return;
      }
    }
  }

  std::vector<int32_t> Closure(std::vector<int32_t> set) {
    std::vector<int32_t> out;
    std::vector<int32_t>& stack = set;
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      if (mark_.size() < nfa_.size()) mark_.resize(nfa_.size(), 0);
      if (mark_[static_cast<size_t>(s)] == epoch_) continue;
      mark_[static_cast<size_t>(s)] = epoch_;
      out.push_back(s);
      for (int32_t t : nfa_[static_cast<size_t>(s)].eps) stack.push_back(t);
    }
    ++epoch_;
    // Only states with edges (and the end states) matter for identity: drop pure-epsilon ones.
    std::vector<int32_t> kept;
    for (int32_t s : out) {
      const NfaState& st = nfa_[static_cast<size_t>(s)];
      if (!st.sets.empty() || !st.calls.empty() || st.eps.empty()) kept.push_back(s);
    }
    std::sort(kept.begin(), kept.end());
    return kept;
  }

  void ComputeByteClasses() {
    std::map<std::vector<bool>, int> classes;
    for (int b = 0; b < 256; ++b) {
      std::vector<bool> sig(sets_.size());
      for (size_t i = 0; i < sets_.size(); ++i) sig[i] = sets_[i].test(static_cast<size_t>(b));
      auto [it, inserted] = classes.emplace(sig, static_cast<int>(classes.size()));
      byte_class_[b] = static_cast<uint8_t>(it->second);
      if (inserted) class_rep_.push_back(b);
    }
    num_classes_ = static_cast<int>(classes.size());
    set_classes_.assign(sets_.size(), {});
    for (size_t i = 0; i < sets_.size(); ++i)
      for (int c = 0; c < num_classes_; ++c)
        if (sets_[i].test(static_cast<size_t>(class_rep_[static_cast<size_t>(c)])))
          set_classes_[i].push_back(c);
  }

  void CheckLeftRecursion(const Automaton& a, const std::vector<RuleId>& order) {
    size_t nr = ir_.rules().size();
    nullable_.assign(nr, 0);
    std::vector<uint8_t>& nullable = nullable_;
    // A rule is nullable when its start reaches a final state through calls of nullable rules.
    auto reach = [&](RuleId r, std::vector<RuleId>* callees) {
      std::vector<StateId> stack = {a.rule_start[static_cast<size_t>(r)]};
      std::set<StateId> seen(stack.begin(), stack.end());
      bool final = false;
      while (!stack.empty()) {
        StateId s = stack.back();
        stack.pop_back();
        if (a.is_final[static_cast<size_t>(s)]) final = true;
        for (int32_t i = a.call_begin[static_cast<size_t>(s)];
             i < a.call_begin[static_cast<size_t>(s) + 1]; ++i) {
          auto [callee_start, ret] = a.calls[static_cast<size_t>(i)];
          RuleId callee = a.rule_of[static_cast<size_t>(callee_start)];
          if (callees) callees->push_back(callee);
          if (nullable[static_cast<size_t>(callee)] && seen.insert(ret).second)
            stack.push_back(ret);
        }
      }
      return final;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (RuleId r : order)
        if (!nullable[static_cast<size_t>(r)] && reach(r, nullptr)) {
          nullable[static_cast<size_t>(r)] = 1;
          changed = true;
        }
    }
    std::map<RuleId, std::vector<RuleId>> left;
    for (RuleId r : order) reach(r, &left[r]);
    std::map<RuleId, int> color;
    std::function<void(RuleId)> dfs = [&](RuleId r) {
      color[r] = 1;
      for (RuleId c : left[r]) {
        Require(color[c] != 1, ErrorCode::kInvalidArgument,
                "left-recursive rule '" + ir_.rules()[static_cast<size_t>(c)].name +
                    "' (a rule that can call itself before reading any byte is not supported)");
        if (color[c] == 0) dfs(c);
      }
      color[r] = 2;
    };
    for (RuleId r : order)
      if (color[r] == 0) dfs(r);
  }

  // FIRST per state (the bytes readable next, through calls, and past the rule's end through
  // its FOLLOW) and FOLLOW per rule, to a fixpoint.
  void ComputeFollow(Automaton& a) {
    size_t n = a.num_states();
    a.follow.assign(ir_.rules().size(), ByteSet());
    std::vector<ByteSet> first(n);
    std::vector<ByteSet> class_bytes(static_cast<size_t>(num_classes_));
    for (int b = 0; b < 256; ++b) class_bytes[a.byte_class[b]].set(static_cast<size_t>(b));
    for (size_t s = 0; s < n; ++s)
      for (int c = 0; c < num_classes_; ++c)
        if (a.next[s * static_cast<size_t>(num_classes_) + static_cast<size_t>(c)] >= 0)
          first[s] |= class_bytes[static_cast<size_t>(c)];
    for (bool changed = true; changed;) {
      changed = false;
      CheckTime();
      for (size_t s = n; s-- > 0;) {
        ByteSet f = first[s];
        auto r = static_cast<size_t>(a.rule_of[s]);
        if (a.is_final[s]) f |= a.follow[r];
        for (int32_t i = a.call_begin[s]; i < a.call_begin[s + 1]; ++i) {
          auto [callee_start, ret] = a.calls[static_cast<size_t>(i)];
          auto callee = static_cast<size_t>(a.rule_of[static_cast<size_t>(callee_start)]);
          f |= first[static_cast<size_t>(callee_start)];
          if (nullable_[callee]) f |= first[static_cast<size_t>(ret)];
          ByteSet fo = a.follow[callee] | first[static_cast<size_t>(ret)];
          if (fo != a.follow[callee]) {
            a.follow[callee] = fo;
            changed = true;
          }
        }
        if (f != first[s]) {
          first[s] = f;
          changed = true;
        }
      }
    }
  }

  static constexpr double kInlineStates = 3000;
  const GrammarIr& ir_;
  CompileLimits limits_;
  std::vector<NfaState> nfa_;
  std::vector<ByteSet> sets_;
  std::unordered_map<std::string, int32_t> set_ids_;
  std::vector<std::vector<RuleId>> refs_;
  std::vector<int> ref_count_;
  std::vector<uint8_t> recursive_;
  std::vector<uint8_t> nullable_;
  std::vector<double> rule_size_;
  std::vector<RuleId> pending_calls_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 1;
  uint8_t byte_class_[256] = {};
  std::vector<int> class_rep_;
  std::vector<std::vector<int>> set_classes_;  // per byte set: the classes it contains
  std::vector<std::vector<int32_t>> by_class_;
  int num_classes_ = 0;
  uint64_t ticks_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace

Automaton BuildAutomaton(const GrammarIr& ir, const CompileLimits& limits) {
  return Builder(ir, limits).Build();
}

}  // namespace m3::grammar
