/* fc_queue.cc — fakecuda: streams, events and the operations queued on them.
 *
 * Every stream operation becomes an Op with the ops it must follow (the
 * previous op of its stream, the legacy stream's implicit ordering, event
 * waits). Nothing runs when it is enqueued: an op runs, after everything it
 * depends on, only when the host waits for it (stream/event/device
 * synchronise, blocking copies, cudaFree/cudaFreeHost). Each op lists the
 * byte ranges of allocations it reads or writes; at enqueue, a conflicting
 * use by a pending op that is not among its ancestors is a race.
 */
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_set>

#include "fc_internal.h"

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace fc {

namespace {

struct Stream;

struct Op {
    unsigned long long id;
    Stream *s;
    int dev;
    std::string what;
    std::vector<std::shared_ptr<Op>> deps;
    std::vector<Use> uses;
    std::function<cudaError_t()> fn; /* an error return is a sticky fault */
    bool done = false;
    double t_done = 0;
};
using OpP = std::shared_ptr<Op>;

struct Stream {
    int dev = 0;
    unsigned flags = 0;
    bool legacy = false;
    bool destroyed = false;
    unsigned long long id = 0;
    OpP last;
};

struct Event {
    int dev = 0;
    unsigned flags = 0;
    bool destroyed = false;
    OpP op; /* last record */
    bool recorded = false;
};

struct Pool {
    int dev = 0;
    bool destroyed = false;
};

Stream legacy_streams[FAKECUDA_MAX_DEVICES];
std::set<Stream *> streams;          /* user streams, destroyed ones kept */
std::set<Event *> events;
std::set<Pool *> pools;
std::vector<OpP> pending;            /* enqueued, not run */
unsigned long long next_op = 1, next_stream = 1;
void *last_launch_stream = nullptr;
bool legacy_init = false;
thread_local Stream *per_thread[FAKECUDA_MAX_DEVICES];

/* At exit: the records of streams, events and pools (kept after destroy so
 * that a stale handle is recognised) and whatever work never ran. */
struct Cleanup {
    ~Cleanup()
    {
        pending.clear();
        for (auto &l : legacy_streams)
            l.last.reset();
        for (Stream *s : streams)
            delete s;
        for (Event *e : events)
            delete e;
        for (Pool *p : pools)
            delete p;
        streams.clear();
        events.clear();
        pools.clear();
    }
} cleanup;

double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

const char *sname(const Stream *s, char *buf, size_t n)
{
    if (s->legacy)
        snprintf(buf, n, "legacy stream of device %d", s->dev);
    else
        snprintf(buf, n, "stream #%llu (device %d)", s->id, s->dev);
    return buf;
}

/* Resolves a stream handle for the current device; NULL on error (set). */
Stream *get_stream(cudaStream_t h, cudaError_t *err)
{
    *err = cudaSuccess;
    int dev = current_device();
    if (!legacy_init) {
        for (int d = 0; d < FAKECUDA_MAX_DEVICES; d++) {
            legacy_streams[d].dev = d;
            legacy_streams[d].legacy = true;
        }
        legacy_init = true;
    }
    if (h == nullptr || h == cudaStreamLegacy)
        return &legacy_streams[dev];
    if (h == cudaStreamPerThread) {
        if (!per_thread[dev]) {
            per_thread[dev] = new Stream;
            per_thread[dev]->dev = dev;
            per_thread[dev]->id = next_stream++;
            streams.insert(per_thread[dev]);
        }
        return per_thread[dev];
    }
    Stream *s = (Stream *)h;
    if (!streams.count(s) || s->destroyed) {
        note(false, "stream handle %p is not a live stream", (void *)h);
        *err = fail(cudaErrorInvalidResourceHandle);
        return nullptr;
    }
    return s;
}

bool is_pending(const OpP &o) { return o && !o->done; }

/* Pending ancestors of the deps, sorted by id (= a valid execution order). */
std::vector<OpP> pending_closure(const std::vector<OpP> &roots)
{
    std::vector<OpP> out, stack;
    std::unordered_set<Op *> seen;
    for (auto &r : roots)
        if (is_pending(r))
            stack.push_back(r);
    while (!stack.empty()) {
        OpP o = stack.back();
        stack.pop_back();
        if (!seen.insert(o.get()).second)
            continue;
        out.push_back(o);
        for (auto &d : o->deps)
            if (is_pending(d))
                stack.push_back(d);
    }
    std::sort(out.begin(), out.end(), [](const OpP &a, const OpP &b) { return a->id < b->id; });
    return out;
}

void execute(const OpP &o)
{
    if (o->done)
        return;
    if (!sticky[o->dev] && o->fn) { /* after a fault the device runs nothing */
        cudaError_t e = o->fn(); /* inside device_access (run, run_pending) */
        if (e) {
            sticky[o->dev] = e;
            stats.faults++;
        }
    }
    o->done = true;
    o->t_done = now_ms();
    o->fn = nullptr;
    o->deps.clear(); /* done ops must not keep their history alive */
    stats.ops_executed++;
}

void compact()
{
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const OpP &o) { return o->done; }),
                  pending.end());
}

void run(const OpP &target)
{
    if (!is_pending(target))
        return;
    device_access(true);
    for (auto &o : pending_closure({target}))
        execute(o);
    device_access(false);
    compact();
}

void check_races(const OpP &op)
{
    if (op->uses.empty() || pending.empty())
        return;
    std::unordered_set<Op *> anc;
    for (auto &o : pending_closure(op->deps))
        anc.insert(o.get());
    for (auto &p : pending) {
        if (p->done || anc.count(p.get()))
            continue;
        for (auto &u : op->uses)
            for (auto &v : p->uses) {
                if (u.a != v.a || !(u.write || v.write) || u.hi <= v.lo || v.hi <= u.lo)
                    continue;
                char b1[64], b2[64];
                stats.races++;
                note(true,
                     "RACE: %s on %s and %s on %s use bytes [%#lx, %#lx) of allocation #%llu "
                     "(%s) with no order between them",
                     op->what.c_str(), sname(op->s, b1, sizeof b1), p->what.c_str(),
                     sname(p->s, b2, sizeof b2), (unsigned long)std::max(u.lo, v.lo),
                     (unsigned long)std::min(u.hi, v.hi), u.a->id,
                     u.a->device ? "device memory" : "page-locked host memory");
                return;
            }
    }
}

/* Enqueues an op on s; extra: more ops it must follow. */
OpP enqueue(Stream *s, std::string what, std::vector<Use> uses, std::function<cudaError_t()> fn,
            const std::vector<OpP> &extra = {})
{
    OpP op = std::make_shared<Op>();
    op->id = next_op++;
    op->s = s;
    op->dev = s->dev;
    op->what = std::move(what);
    op->uses = std::move(uses);
    op->fn = std::move(fn);
    if (is_pending(s->last))
        op->deps.push_back(s->last);
    for (auto &x : extra)
        if (is_pending(x))
            op->deps.push_back(x);
    /* legacy stream semantics: it waits for every blocking stream of its
     * device, and blocking streams wait for it */
    if (s->legacy) {
        for (Stream *o : streams)
            if (o->dev == s->dev && !(o->flags & cudaStreamNonBlocking) && is_pending(o->last))
                op->deps.push_back(o->last);
    } else if (!(s->flags & cudaStreamNonBlocking) && is_pending(legacy_streams[s->dev].last)) {
        op->deps.push_back(legacy_streams[s->dev].last);
    }
    check_races(op);
    s->last = op;
    pending.push_back(op);
    stats.ops_enqueued++;
    return op;
}

/* What a pointer range is, for copies. */
enum Kind { K_HOST, K_PINNED, K_DEVICE, K_BAD };

Kind classify(const void *p, size_t n, Alloc **a_ret, const char *role, const char *call)
{
    *a_ret = nullptr;
    Alloc *a = find_alloc(p, false);
    if (!a) {
        if (find_alloc(p, true)) {
            note(false, "%s: %s %p is freed device memory", call, role, p);
            return K_BAD;
        }
        return K_HOST;
    }
    if ((uintptr_t)p + n > a->base + a->size) {
        note(false, "%s: %s [%p, +%zu) runs past its allocation (%zu bytes)", call, role, p, n,
             a->size);
        return K_BAD;
    }
    if (a->device && a->free_pending) {
        note(false, "%s: %s %p is device memory already given to cudaFreeAsync", call, role, p);
        return K_BAD;
    }
    *a_ret = a;
    return a->device ? K_DEVICE : K_PINNED;
}

const char *kind_name(int k)
{
    static const char *n[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice",
                              "Default"};
    return k >= 0 && k <= 4 ? n[k] : "?";
}

/* Validates a copy; fills the uses of device/pinned ranges. */
cudaError_t check_copy(void *dst, const void *src, size_t n, int kind, std::vector<Use> &uses,
                       const char *call)
{
    if (kind < 0 || kind > 4)
        return fail(cudaErrorInvalidMemcpyDirection);
    Alloc *ad, *as;
    Kind kd = classify(dst, n, &ad, "destination", call);
    Kind ks = classify(src, n, &as, "source", call);
    if (kd == K_BAD || ks == K_BAD)
        return fail(cudaErrorInvalidValue);
    bool dd = kd == K_DEVICE, sd = ks == K_DEVICE;
    bool ok = kind == cudaMemcpyDefault || (kind == cudaMemcpyHostToDevice && dd && !sd) ||
              (kind == cudaMemcpyDeviceToHost && !dd && sd) ||
              (kind == cudaMemcpyDeviceToDevice && dd && sd) ||
              (kind == cudaMemcpyHostToHost && !dd && !sd);
    if (!ok) {
        note(false, "%s: kind %s but destination is %s and source is %s memory", call,
             kind_name(kind), dd ? "device" : "host", sd ? "device" : "host");
        return fail(cudaErrorInvalidValue);
    }
    if (ad)
        uses.push_back(Use{ad, (uintptr_t)dst, (uintptr_t)dst + n, true});
    if (as)
        uses.push_back(Use{as, (uintptr_t)src, (uintptr_t)src + n, false});
    return cudaSuccess;
}

/* FAKECUDA_CORRUPT_COPY: true for the blocking device-to-host copy (how a
 * program reads results back) that must come back with one wrong bit: a
 * stand-in for wrong GPU bytes. */
bool is_d2h(void *dst, const void *src, int kind)
{
    if (!corrupt_copy)
        return false;
    Alloc *ad = find_alloc(dst, false), *as = find_alloc(src, false);
    bool d2h = (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDefault) && as &&
               as->device && !(ad && ad->device);
    if (!d2h || --corrupt_copy)
        return false;
    note(true, "FAKECUDA_CORRUPT_COPY: flipping a bit of this device-to-host copy");
    return true;
}

cudaError_t async_alloc(void **ptr, size_t size, int dev, cudaStream_t stream)
{
    if (!ptr)
        return fail(cudaErrorInvalidValue);
    *ptr = nullptr;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (size == 0)
        return fail(cudaErrorInvalidValue);
    e = alloc_device(dev, size, ptr);
    if (e)
        return e;
    Alloc *a = find_alloc(*ptr, false);
    /* the memory is valid in stream order from here */
    enqueue(s, "cudaMallocAsync", {Use{a, a->base, a->base + a->size, true}}, nullptr);
    stats.async_allocs++;
    return cudaSuccess;
}

} // namespace

void run_pending(int dev)
{
    std::vector<OpP> roots;
    for (auto &o : pending)
        if (!o->done && (dev < 0 || o->dev == dev))
            roots.push_back(o);
    device_access(true);
    for (auto &o : pending_closure(roots))
        execute(o);
    device_access(false);
    compact();
}

} // namespace fc

using namespace fc;

/* ---- kernels ---- */

cudaError_t fakecuda_enqueue_kernel(const char *name, dim3 grid, dim3 block, size_t shmem,
                                    cudaStream_t stream, const fakecuda_use *uses, size_t nuses,
                                    std::function<void()> body)
{
    Lock l;
    int dev = current_device();
    cudaError_t e = need_ctx(dev);
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (s->dev != dev) {
        note(false, "launch of %s on a stream of device %d while device %d is current", name,
             s->dev, dev);
        return fail(cudaErrorInvalidResourceHandle);
    }
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.x > 0x7fffffffu ||
        grid.y == 0 || grid.y > 65535 || grid.z == 0 || grid.z > 65535 || shmem > 48 * 1024) {
        note(false, "launch of %s: invalid configuration grid (%u,%u,%u) block (%u,%u,%u)", name,
             grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return fail(cudaErrorInvalidConfiguration);
    }
    if (inject(FAKECUDA_CALL_LAUNCH, &e))
        return fail(e);
    std::vector<Use> u;
    std::vector<fakecuda_use> args(uses, uses + nuses);
    for (auto &x : args) {
        Alloc *a = x.ptr ? find_alloc(x.ptr, false) : nullptr;
        if (a)
            u.push_back(Use{a, a->base, a->base + a->size, x.write != 0});
    }
    std::string what = std::string("kernel ") + name;
    enqueue(s, what, std::move(u), [args, grid, block, body, dev, what]() -> cudaError_t {
        cudaError_t f;
        if (inject_fault(&f)) {
            note(true, "%s: injected fault %s", what.c_str(), cudaGetErrorName(f));
            return f;
        }
        for (size_t i = 0; i < args.size(); i++) {
            const void *p = args[i].ptr;
            if (!p)
                continue;
            Alloc *a = find_alloc(p, false);
            if (!a || (a->device && a->dev != dev)) {
                note(true, "%s: pointer argument %zu (%p) is not %s: illegal address", what.c_str(),
                     i, p, "device memory of this device or page-locked host memory");
                return cudaErrorIllegalAddress;
            }
            if ((uintptr_t)p % args[i].align) {
                note(true, "%s: pointer argument %zu (%p) is not %zu-byte aligned", what.c_str(), i,
                     p, args[i].align);
                return cudaErrorMisalignedAddress;
            }
        }
        gridDim = grid;
        blockDim = block;
        for (unsigned bz = 0; bz < grid.z; bz++)
            for (unsigned by = 0; by < grid.y; by++)
                for (unsigned bx = 0; bx < grid.x; bx++) {
                    blockIdx = uint3{bx, by, bz};
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                threadIdx = uint3{tx, ty, tz};
                                body();
                            }
                }
        return cudaSuccess;
    });
    stats.launches++;
    last_launch_stream = (void *)stream;
    return cudaSuccess;
}

extern "C" {

size_t fakecuda_pending_ops(void)
{
    Lock l;
    size_t n = 0;
    for (auto &o : pending)
        n += !o->done;
    return n;
}

void *fakecuda_last_launch_stream(void)
{
    Lock l;
    return last_launch_stream;
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    Lock l;
    if (!stream || (flags & ~1u))
        return fail(cudaErrorInvalidValue);
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = new Stream;
    s->dev = current_device();
    s->flags = flags;
    s->id = next_stream++;
    streams.insert(s);
    *stream = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return fail(cudaErrorInvalidResourceHandle);
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    s->destroyed = true; /* its pending work still runs; the handle is dead */
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    stats.host_waits++;
    run(s->last);
    return sticky[s->dev] ? fail(sticky[s->dev]) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (sticky[s->dev])
        return fail(sticky[s->dev]);
    return is_pending(s->last) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    if (!device)
        return fail(cudaErrorInvalidValue);
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    *device = s->dev;
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    Event *ev = (Event *)event;
    if (!ev || !events.count(ev) || ev->destroyed || flags)
        return fail(cudaErrorInvalidResourceHandle);
    enqueue(s, "cudaStreamWaitEvent", {}, nullptr, {ev->op}); /* the record as of now */
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    Lock l;
    int dev = current_device();
    cudaError_t e = need_ctx(dev);
    if (e)
        return e;
    stats.device_syncs++;
    run_pending(dev);
    return sticky[dev] ? fail(sticky[dev]) : cudaSuccess;
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    Lock l;
    if (!event || (flags & ~3u))
        return fail(cudaErrorInvalidValue);
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Event *ev = new Event;
    ev->dev = current_device();
    ev->flags = flags;
    events.insert(ev);
    *event = (cudaEvent_t)ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

static Event *get_event(cudaEvent_t event)
{
    Event *ev = (Event *)event;
    return ev && events.count(ev) && !ev->destroyed ? ev : nullptr;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    Lock l;
    Event *ev = get_event(event);
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    ev->destroyed = true;
    ev->op = nullptr;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Event *ev = get_event(event);
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (s->dev != ev->dev) {
        note(false, "cudaEventRecord: event of device %d on a stream of device %d", ev->dev,
             s->dev);
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (inject(FAKECUDA_CALL_EVENT_RECORD, &e))
        return fail(e);
    ev->op = enqueue(s, "cudaEventRecord", {}, nullptr);
    ev->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    Event *ev = get_event(event);
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    stats.host_waits++;
    run(ev->op);
    return sticky[ev->dev] ? fail(sticky[ev->dev]) : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    Lock l;
    cudaError_t e = check_init();
    if (e)
        return e;
    Event *ev = get_event(event);
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    if (sticky[ev->dev])
        return fail(sticky[ev->dev]);
    return is_pending(ev->op) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    Lock l;
    Event *a = get_event(start), *b = get_event(end);
    if (!ms || !a || !b)
        return fail(!ms ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming || !a->recorded || !b->recorded)
        return fail(cudaErrorInvalidResourceHandle);
    if (is_pending(a->op) || is_pending(b->op))
        return fail(cudaErrorNotReady);
    *ms = (float)((b->op ? b->op->t_done : 0) - (a->op ? a->op->t_done : 0));
    return cudaSuccess;
}

/* ---- copies ---- */

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src)
        return fail(cudaErrorInvalidValue);
    std::vector<Use> uses;
    e = check_copy(dst, src, n, kind, uses, "cudaMemcpyAsync");
    if (e)
        return e;
    if (inject(FAKECUDA_CALL_MEMCPY_ASYNC, &e))
        return fail(e);
    /* pageable host memory too is read/written when the stream gets there */
    enqueue(s, std::string("cudaMemcpyAsync ") + kind_name(kind), std::move(uses),
            [dst, src, n]() -> cudaError_t {
                memmove(dst, src, n);
                return cudaSuccess;
            });
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src)
        return fail(cudaErrorInvalidValue);
    std::vector<Use> uses;
    e = check_copy(dst, src, n, kind, uses, "cudaMemcpy");
    if (e)
        return e;
    Stream *s = get_stream(nullptr, &e);
    bool flip = is_d2h(dst, src, kind);
    OpP op = enqueue(s, std::string("cudaMemcpy ") + kind_name(kind), std::move(uses),
                     [dst, src, n, flip]() -> cudaError_t {
                         memmove(dst, src, n);
                         if (flip)
                             ((uint8_t *)dst)[n / 2] ^= 0x01;
                         return cudaSuccess;
                     });
    stats.host_waits++;
    run(op); /* blocking: on the legacy stream, after the blocking streams */
    return sticky[s->dev] ? fail(sticky[s->dev]) : cudaSuccess;
}

static cudaError_t memset_op(void *dst, int value, size_t n, cudaStream_t stream, bool wait)
{
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (n == 0)
        return cudaSuccess;
    Alloc *a;
    if (classify(dst, n, &a, "destination", "cudaMemset") != K_DEVICE) {
        note(false, "cudaMemset: %p is not device memory", dst);
        return fail(cudaErrorInvalidValue);
    }
    OpP op = enqueue(s, "cudaMemset", {Use{a, (uintptr_t)dst, (uintptr_t)dst + n, true}},
                     [dst, value, n]() -> cudaError_t {
                         memset(dst, value, n);
                         return cudaSuccess;
                     });
    if (wait) {
        stats.host_waits++;
        run(op);
    }
    return sticky[s->dev] ? fail(sticky[s->dev]) : cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream)
{
    Lock l;
    return memset_op(dst, value, n, stream, false);
}

cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    Lock l;
    return memset_op(dst, value, n, nullptr, true);
}

/* ---- stream-ordered allocation ---- */

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    Lock l;
    return async_alloc(ptr, size, current_device(), stream);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    Lock l;
    cudaError_t e = need_ctx(current_device());
    if (e)
        return e;
    Stream *s = get_stream(stream, &e);
    if (!s)
        return e;
    if (!ptr)
        return cudaSuccess;
    Alloc *a = find_alloc(ptr, false);
    if (!a || !a->device || a->base != (uintptr_t)ptr || a->free_pending) {
        note(false, "cudaFreeAsync(%p): not the start of live device memory", ptr);
        return fail(cudaErrorInvalidValue);
    }
    a->free_pending = true;
    enqueue(s, "cudaFreeAsync", {Use{a, a->base, a->base + a->size, true}}, [a]() -> cudaError_t {
        retire(a);
        return cudaSuccess;
    });
    stats.async_frees++;
    return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    Lock l;
    if (!pool || !props || props->allocType != cudaMemAllocationTypePinned ||
        props->location.type != cudaMemLocationTypeDevice)
        return fail(cudaErrorInvalidValue);
    cudaError_t e = check_init();
    if (e)
        return e;
    if (props->location.id < 0 || props->location.id >= ndev)
        return fail(cudaErrorInvalidDevice);
    Pool *p = new Pool;
    p->dev = props->location.id;
    pools.insert(p);
    *pool = (cudaMemPool_t)p;
    return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    Lock l;
    Pool *p = (Pool *)pool;
    if (!p || !pools.count(p) || p->destroyed)
        return fail(cudaErrorInvalidValue);
    p->destroyed = true; /* outstanding allocations stay valid */
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    Lock l;
    Pool *p = (Pool *)pool;
    if (!p || !pools.count(p) || p->destroyed || !value || attr < 1 || attr > 4)
        return fail(cudaErrorInvalidValue);
    return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream)
{
    Lock l;
    Pool *p = (Pool *)pool;
    if (!p || !pools.count(p) || p->destroyed)
        return fail(cudaErrorInvalidValue);
    return async_alloc(ptr, size, p->dev, stream);
}

} /* extern "C" */
