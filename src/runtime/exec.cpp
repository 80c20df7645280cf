// The hot path: per run and per launch. Allocates nothing once a program's var assignment
// has been seen (graph capture and the first cuBLASLt plan of a shape excepted).
#include <algorithm>
#include <cstring>

#include "kern/base/error.hpp"
#include "runtime/collective_args.hpp"
#include "runtime/gemm_args.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {
namespace {

[[noreturn]] void overflow(const CallExec& c, std::string_view what, const rt::CompiledExpr& e) {
  throw Error::call(c.context(), Error(ErrorKind::Api, fmt::format("{} = {} overflows at these vars", what, e.text)));
}

void check_gemm(const CallExec& c, const LaunchExec& e) {
  if (auto problem = rt::gemm_shape_problem(*e.ext, e.gemm, e.ext_args))
    throw Error::call(c.context(), Error(ErrorKind::Manifest, *problem));
}

}  // namespace

void Runtime::Impl::apply(ProgramExec& p) {
  const std::uint64_t* v = var_values.data();
  ++stats.geometry_evaluations;
  for (CallExec& c : p.calls) {
    for (LaunchExec& e : c.launches) {
      if (e.when_var) {
        const std::uint64_t x = v[*e.when_var];
        e.active = (!e.when_min || x >= *e.when_min) && (!e.when_max || x <= *e.when_max);
      }
      if (e.ext && e.ext->family == core::ExternSpec::Family::Collective) {
        const std::optional<std::uint64_t> count = rt::int_value_at(e.ext_args[2], v);
        if (!count) throw Error::call(c.context(), Error(ErrorKind::Api, "a collective's count overflows at these vars"));
        if (auto problem = rt::collective_count_problem(e.collective, *count, m->topology.at(e.group),
                                                        dtype_size(e.ext->in), e.ext_args[0].pointer->bytes,
                                                        e.ext_args[1].pointer->bytes))
          throw Error::call(c.context(), Error(ErrorKind::Api, *problem));
        e.count = *count;
        e.comm = &comms.at(e.group);  // joined: programs run only once nothing awaits connect
        continue;
      }
      if (e.ext) {
        if (!rt::gemm_shape_at(*e.ext, e.ext_args, v, e.gemm))
          throw Error::call(c.context(), Error(ErrorKind::Api, "a GEMM size expression overflows at these vars"));
        e.gemm_ops = rt::gemm_operands(*e.ext, e.ext_args);
        if (e.active) {
          check_gemm(c, e);
          try {
            if (e.ext->library == core::ExternSpec::Library::CublasLt) blas->prepare(e.gemm, e.gemm_ops);
          } catch (const Error& err) {
            throw Error::call(c.context(), err);
          }
        }
        continue;
      }
      for (int d = 0; d < 3; ++d) {
        auto g = e.grid[d].eval(v);
        if (!g) overflow(c, "grid", e.grid[d]);
        if (*g == 0 || *g > 0xffffffffu)
          throw Error::call(c.context(), Error(ErrorKind::Api, fmt::format("grid[{}] = {} = {} is outside [1, 2^32)", d,
                                                                           e.grid[d].text, *g)));
        e.geometry.grid[d] = static_cast<std::uint32_t>(*g);
      }
      if (e.shared_mem) {
        auto s = e.shared_mem->eval(v);
        if (!s || *s > 0xffffffffu) overflow(c, "shared_mem", *e.shared_mem);
        e.geometry.shared_mem = static_cast<std::uint32_t>(*s);
      }
      const rt::Patch* bad = nullptr;
      if (!e.image.apply(v, &bad)) overflow(c, "argument", bad->expr);
    }
  }
}

void Runtime::Impl::require_connected(const ProgramExec& p) const {
  if (p.decl->once || ready()) return;
  std::vector<std::string> waiting;
  if (!connected_once)
    for (const std::string& b : peer_buffers) waiting.push_back("peer buffer " + b);
  for (const std::string& g : collective_groups)
    if (!comms.contains(g)) waiting.push_back("NCCL group " + g);
  fail(ErrorKind::Api, "program {}: {} not ready: connect this rank to its peers first (offer, connect)", p.name,
       fmt::join(waiting, ", "));
}

void Runtime::Impl::prepare(ProgramExec& p, const Vars& given) {
  vars.assign(given, var_values, p.name);
  bool same = p.applied;
  for (std::size_t i = 0; i < p.read_vars.size(); ++i) {
    const std::uint32_t vi = p.read_vars[i];
    if (var_values[vi] == 0)
      fail(ErrorKind::Api, "program {} reads var {}: give it a value in [1, {}]", p.name, vars.name(vi), vars.max(vi));
    same = same && p.key[i] == var_values[vi];
  }
  if (same) return;
  p.applied = false;
  apply(p);
  for (std::size_t i = 0; i < p.read_vars.size(); ++i) p.key[i] = var_values[p.read_vars[i]];
  p.applied = true;
}

void Runtime::Impl::enqueue_call(CallExec& c) {
  for (LaunchExec& e : c.launches) {
    if (!e.active) continue;
    if (e.ext && e.ext->family == core::ExternSpec::Family::Collective) {
      e.comm->collective(e.collective, e.ext_args[0].pointer->address, e.ext_args[1].pointer->address, e.count,
                         e.ext->in, *stream);
    } else if (e.ext) {
      if (e.ext->library == core::ExternSpec::Library::Cublas)
        cublas->gemm_bf16_tn_f32(e.gemm, e.gemm_ops.a, e.gemm_ops.w, e.gemm_ops.c, *stream);
      else
        blas->gemm(e.gemm, e.gemm_ops, *stream);
      ++stats.gemm_calls;
    } else {
      cuda::launch(e.fn, e.geometry, e.image.params(), *stream);
      ++stats.kernel_launches;
    }
  }
}

void Runtime::Impl::enqueue(ProgramExec& p, std::size_t lo, std::size_t hi) {
  for (std::size_t i = lo; i < hi; ++i) {
    CallExec& c = p.calls[i];
    try {
      enqueue_call(c);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Call) throw;
      throw Error::call(c.context(), e);
    }
  }
}

void Runtime::Impl::run(ProgramExec& p, const Vars& given, std::size_t lo, std::size_t hi, bool whole, bool wait_done) {
  if (!weights_loaded && p.decl->once == false)
    fail(ErrorKind::Api, "program {}: load_weights must run before any program", p.name);
  if (lo > hi || hi > p.calls.size())
    fail(ErrorKind::Api, "program {}: call range [{}, {}) is outside its {} calls", p.name, lo, hi, p.calls.size());
  require_connected(p);
  prepare(p, given);
  if (whole && p.decl->graph && !options.eager) {
    auto it = p.graphs.find(p.key);
    if (it == p.graphs.end()) {
      cuda::Graph g = cuda::Graph::capture(*stream, [&] { enqueue(p, 0, p.calls.size()); });
      ++stats.graph_captures;
      it = p.graphs.emplace(p.key, std::move(g)).first;
    }
    it->second.launch(*stream);
    ++stats.graph_launches;
  } else {
    enqueue(p, lo, hi);
  }
  if (wait_done) wait();
}

void Runtime::run(std::string_view program, const Vars& vars) {
  ProgramExec& p = impl_->program(program);
  if (p.decl->once) fail(ErrorKind::Api, "program {} is a once program: it ran during load_weights", p.name);
  impl_->run(p, vars, 0, p.calls.size(), true);
}

void Runtime::run_and_read(std::string_view program, const Vars& vars, std::string_view output, std::uint64_t offset,
                           std::span<std::byte> out, const std::function<void()>& before_wait) {
  Impl& r = *impl_;
  ProgramExec& p = r.program(program);
  if (p.decl->once) fail(ErrorKind::Api, "program {} is a once program: it ran during load_weights", p.name);
  BufferSlot& b = r.output_range(output, offset, out.size());  // checked before anything runs
  r.run(p, vars, 0, p.calls.size(), true, false);
  r.queue_read(b, offset, out.size());
  if (before_wait) before_wait();  // e.g. the next step's inputs, queued behind the read
  r.wait();                        // the one wait: the program, the read, and whatever before_wait queued
  r.finish_read(b, offset, out);
}

void Runtime::launch(std::string_view program, const Vars& vars) {
  ProgramExec& p = impl_->program(program);
  if (p.decl->once) fail(ErrorKind::Api, "program {} is a once program: it ran during load_weights", p.name);
  impl_->run(p, vars, 0, p.calls.size(), true, false);
}

void Runtime::synchronize() { impl_->wait(); }

void Runtime::run_range(std::string_view program, const Vars& vars, std::size_t lo, std::size_t hi) {
  ProgramExec& p = impl_->program(program);
  impl_->run(p, vars, lo, hi, false);
}

void Runtime::launch_range(std::string_view program, const Vars& vars, std::size_t lo, std::size_t hi) {
  ProgramExec& p = impl_->program(program);
  if (p.decl->once) fail(ErrorKind::Api, "program {} is a once program: it ran during load_weights", p.name);
  impl_->run(p, vars, lo, hi, false, false);
}

std::size_t Runtime::call_count(std::string_view program) { return impl_->program(program).calls.size(); }

bool Runtime::replays_graph(std::string_view program) {
  return impl_->program(program).decl->graph && !impl_->options.eager;
}

void Runtime::replay(std::string_view program, const Vars& given) {
  Impl& r = *impl_;
  ProgramExec& p = r.program(program);
  if (!p.decl->graph) fail(ErrorKind::Api, "program {} does not declare graph: nothing to replay", p.name);
  r.vars.assign(given, r.var_values, p.name);
  std::vector<std::uint64_t> key = rt::graph_key(p.read_vars, r.var_values.data());
  auto it = p.graphs.find(key);
  if (it == p.graphs.end()) {
    std::string captured;
    for (const auto& [k, g] : p.graphs)
      captured += fmt::format("{}[{}]", captured.empty() ? "" : ", ", rt::describe_key(p.read_vars, k, r.vars));
    fail(ErrorKind::Api, "program {}: no graph captured for {} (captured: {})", p.name,
         rt::describe_key(p.read_vars, key, r.vars), captured.empty() ? "none" : captured);
  }
  it->second.launch(*r.stream);
  ++r.stats.graph_launches;
  r.wait();
}

}  // namespace kern::runtime
