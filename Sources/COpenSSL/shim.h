// SPDX-License-Identifier: LGPL-2.1-or-later
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>

// libssl, loaded at run time (dlopen) when the first TLS context is made, not at start: an idle
// batond that no peer has reached does not map it (docs/benchmarks.md, idle memory). Only the
// declarations come from <openssl/ssl.h>; nothing links libssl, so a call that is not in this
// table fails to link instead of loading the library at start.
#include <openssl/opensslv.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define BATON_LIBSSL_FUNCTIONS(X) \
    X(TLS_client_method) X(TLS_server_method) \
    X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl) X(SSL_CTX_set_options) X(SSL_CTX_set_num_tickets) \
    X(SSL_CTX_set_ciphersuites) X(SSL_CTX_set_verify) X(SSL_CTX_set_cert_verify_callback) \
    X(SSL_CTX_set_alpn_select_cb) X(SSL_CTX_set_alpn_protos) \
    X(SSL_new) X(SSL_free) X(SSL_set_bio) X(SSL_get_rbio) X(SSL_set_ex_data) X(SSL_get_ex_data) \
    X(SSL_get_ex_data_X509_STORE_CTX_idx) X(SSL_set_accept_state) X(SSL_set_connect_state) \
    X(SSL_use_certificate) X(SSL_use_PrivateKey) X(SSL_check_private_key) \
    X(SSL_do_handshake) X(SSL_read_ex) X(SSL_write_ex) X(SSL_pending) X(SSL_get_error) \
    X(SSL_export_keying_material) X(SSL_get_current_cipher) X(SSL_CIPHER_standard_name) \
    X(SSL_get0_alpn_selected) X(SSL_get0_peer_certificate)

#define BATON_LIBSSL_FIELD(name) __typeof__(name) * _Nonnull name;
/// Every libssl function Baton calls, as found in the loaded library.
struct baton_libssl {
    BATON_LIBSSL_FUNCTIONS(BATON_LIBSSL_FIELD)
};

#define BATON_LIBSSL_STRING(x) #x
#define BATON_LIBSSL_SONAME_OF(major) "libssl.so." BATON_LIBSSL_STRING(major)

/// Loads libssl (the soname of the headers' major version) and looks up every function; NULL with
/// the reason in `error` when the library or a function is missing. The library stays loaded.
static inline const struct baton_libssl * _Nullable baton_libssl_load(char * _Nonnull error, size_t size) {
    const char *soname = BATON_LIBSSL_SONAME_OF(OPENSSL_VERSION_MAJOR);
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(error, size, "cannot load %s: %s", soname, dlerror());
        return NULL;
    }
    struct baton_libssl *table = malloc(sizeof(struct baton_libssl));
    if (table == NULL) {
        snprintf(error, size, "out of memory");
        return NULL;
    }
#define BATON_LIBSSL_LOOKUP(name) \
    table->name = (__typeof__(name) *)dlsym(handle, #name); \
    if (table->name == NULL) { snprintf(error, size, "%s has no %s", soname, #name); free(table); return NULL; }
    BATON_LIBSSL_FUNCTIONS(BATON_LIBSSL_LOOKUP)
    return table;
}
