/* A minimal NVTX tool: what a profiler such as Nsight Systems receives from a process.
 *
 * NVTX hands its calls to the shared library named by NVTX_INJECTION64_PATH: on the
 * first NVTX call it loads the library and calls InitializeInjectionNvtx2, which fills
 * NVTX's function tables with the tool's callbacks (this is how Nsight Systems gets
 * every range). This one installs callbacks for the domain API (module CORE2) and the
 * global push/pop (module CORE), and writes one line per call to the file named by
 * NVTX_COLLECTOR_OUT (tests/test_nvtx_injection.py builds it with the system compiler
 * against the NVTX3 headers and reads the lines):
 *
 *   domain <domain id> <name>
 *   category <domain id> <category id> <name>
 *   string <domain id> <string id> <text>
 *   push <domain id> <thread id> <category id> <payload type> <payload> <message>
 *   pop <domain id> <thread id>
 *
 * A domain's id is the handle this tool returned for it (1, 2, ...; 0: no domain);
 * thread ids are the kernel's (gettid), as Python's threading.get_native_id() gives.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_STRINGS 4096

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t domains, strings;
static char *string_text[MAX_STRINGS + 1];

static long tid(void) { return (long)syscall(SYS_gettid); }

static nvtxDomainHandle_t domain_create(const char *name) {
    pthread_mutex_lock(&lock);
    uintptr_t id = ++domains;
    fprintf(out, "domain %lu %s\n", (unsigned long)id, name ? name : "");
    pthread_mutex_unlock(&lock);
    return (nvtxDomainHandle_t)id;
}

static void domain_destroy(nvtxDomainHandle_t domain) { (void)domain; }

static void name_category(nvtxDomainHandle_t domain, uint32_t category, const char *name) {
    pthread_mutex_lock(&lock);
    fprintf(out, "category %lu %u %s\n", (unsigned long)(uintptr_t)domain, category, name ? name : "");
    pthread_mutex_unlock(&lock);
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const char *text) {
    pthread_mutex_lock(&lock);
    uintptr_t id = ++strings;
    if (id <= MAX_STRINGS) string_text[id] = strdup(text ? text : "");
    fprintf(out, "string %lu %lu %s\n", (unsigned long)(uintptr_t)domain, (unsigned long)id, text ? text : "");
    pthread_mutex_unlock(&lock);
    return (nvtxStringHandle_t)id;
}

static void write_push(uintptr_t domain, const nvtxEventAttributes_t *a) {
    const char *msg = "";
    long long payload = 0;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) msg = a->message.ascii;
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        uintptr_t id = (uintptr_t)a->message.registered;
        if (id >= 1 && id <= MAX_STRINGS && string_text[id]) msg = string_text[id];
    }
    if (a->payloadType == NVTX_PAYLOAD_TYPE_INT64) payload = a->payload.llValue;
    else if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) payload = (long long)a->payload.ullValue;
    else if (a->payloadType == NVTX_PAYLOAD_TYPE_INT32) payload = a->payload.iValue;
    fprintf(out, "push %lu %ld %u %d %lld %s\n", (unsigned long)domain, tid(), a->category, a->payloadType,
            payload, msg);
}

static int domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&lock);
    write_push((uintptr_t)domain, a);
    pthread_mutex_unlock(&lock);
    return 0;
}

static int domain_pop(nvtxDomainHandle_t domain) {
    pthread_mutex_lock(&lock);
    fprintf(out, "pop %lu %ld\n", (unsigned long)(uintptr_t)domain, tid());
    pthread_mutex_unlock(&lock);
    return 0;
}

static int push_ex(const nvtxEventAttributes_t *a) { return domain_push(NULL, a); }

static int push_a(const char *message) {
    pthread_mutex_lock(&lock);
    fprintf(out, "push 0 %ld 0 0 0 %s\n", tid(), message ? message : "");
    pthread_mutex_unlock(&lock);
    return 0;
}

static int pop(void) { return domain_pop(NULL); }

static void flush_out(void) {
    if (out) fflush(out);
}

static int install(const NvtxExportTableCallbacks *etbl, NvtxCallbackModule module, unsigned int cbid,
                   NvtxFunctionPointer fn) {
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!etbl->GetModuleFunctionTable(module, &table, &size) || !table || cbid > size) return 0;
    *table[cbid] = fn;
    return 1;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    const NvtxExportTableCallbacks *etbl =
        (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!etbl || etbl->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
    pthread_mutex_lock(&lock);
    if (!out) {   /* every module that embeds NVTX initialises on its own: open once */
        const char *path = getenv("NVTX_COLLECTOR_OUT");
        out = fopen(path ? path : "nvtx_collector.txt", "w");
        if (out) {
            setvbuf(out, NULL, _IOLBF, 0);
            atexit(flush_out);
        }
    }
    pthread_mutex_unlock(&lock);
    if (!out) return 0;
    int ok = 1;
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, (NvtxFunctionPointer)domain_destroy);
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainNameCategoryA, (NvtxFunctionPointer)name_category);
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA,
                  (NvtxFunctionPointer)register_string);
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
    ok &= install(etbl, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
    ok &= install(etbl, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)push_ex);
    ok &= install(etbl, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)push_a);
    ok &= install(etbl, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
    return ok;
}
