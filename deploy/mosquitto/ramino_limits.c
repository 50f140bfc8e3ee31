/*
 * ramino_limits: a per-user publish rate for Mosquitto 2.0 (plugin API version 5).
 *
 * Mosquitto has no publish rate per client: whatever a client publishes on the topics its ACL
 * allows reaches every subscriber, and Ramino's server subscribes to every command topic. One
 * client's flood then fills the server's queue at the broker, and legitimate moves wait behind it
 * or are dropped with it. This plugin gives every username a token bucket, as Ramino's embedded
 * broker does (server/net/publish_guard.py):
 *
 * - a PUBLISH costs one token, and one more per KiB of payload;
 * - the bucket refills at `rate` tokens a second up to `burst`;
 * - each message published to a user's inbox (ramino/v1/inbox/USER: the server's replies and
 *   updates) gives that user `inbox_credit` tokens back, so a client answering what the server
 *   sends is never short, however fast it plays;
 * - a PUBLISH over the rate is dropped: the broker forwards it to nobody (a QoS 1 one is still
 *   acknowledged, as with a PUBLISH the ACL refuses);
 * - the usernames in `exempt` (the server's own account) are never limited.
 *
 * Drops are logged at most once every 10 s, with their count and the last user over its rate.
 * Every `prune_seconds` (default 1) the buckets that are full again are forgotten, so memory
 * holds only the users who published lately.
 *
 * Build (Debian: apt-get install mosquitto-dev libmosquitto-dev):
 *     cc -O2 -fPIC -shared -o ramino_limits.so ramino_limits.c
 * Use, in mosquitto.conf (options are global with per_listener_settings false):
 *     plugin /usr/local/lib/mosquitto/ramino_limits.so
 *     plugin_opt_rate 100
 *     plugin_opt_burst 200
 *     plugin_opt_inbox_credit 1
 *     plugin_opt_exempt ramino-server
 * `exempt` takes usernames separated by spaces or commas.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#define INBOX_PREFIX "ramino/v1/inbox/"
#define TABLE_SIZE 65536u
#define LOG_SECONDS 10.0
#define MAX_EXEMPT 16

struct bucket {
	struct bucket *next;
	double tokens;
	double then;
	char user[];
};

static mosquitto_plugin_id_t *plugin_id;
static struct bucket *table[TABLE_SIZE];
static double rate = 100.0;
static double burst = 200.0;
static double inbox_credit = 1.0;
static char *exempt[MAX_EXEMPT];
static int exempt_count;
static double pruned;
static double prune_seconds = 1.0;
static double logged = -LOG_SECONDS;
static unsigned long dropped;
static unsigned long unlogged;

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t hash(const char *text)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while(*text){
		h ^= (uint8_t)*text++;
		h *= 16777619u;
	}
	return h;
}

static bool is_exempt(const char *user)
{
	for(int i = 0; i < exempt_count; i++){
		if(!strcmp(exempt[i], user)) return true;
	}
	return false;
}

/* The bucket of `user`, made full when `create` and there is none; NULL otherwise. */
static struct bucket *find(const char *user, double now, bool create)
{
	uint32_t slot = hash(user) % TABLE_SIZE;
	struct bucket *b;
	size_t length;

	for(b = table[slot]; b; b = b->next){
		if(!strcmp(b->user, user)) return b;
	}
	if(!create) return NULL;
	length = strlen(user);
	b = malloc(sizeof(struct bucket) + length + 1);
	if(!b) return NULL;
	memcpy(b->user, user, length + 1);
	b->tokens = burst;
	b->then = now;
	b->next = table[slot];
	table[slot] = b;
	return b;
}

/* Forget the buckets that have filled up again: only clients that spent lately are kept. */
static void prune(double now)
{
	for(uint32_t slot = 0; slot < TABLE_SIZE; slot++){
		struct bucket **link = &table[slot];
		while(*link){
			struct bucket *b = *link;
			if(b->tokens + (now - b->then) * rate >= burst){
				*link = b->next;
				free(b);
			}else{
				link = &b->next;
			}
		}
	}
	pruned = now;
}

static int on_message(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	const char *user;
	struct bucket *b;
	double now, cost;

	(void)event;
	(void)userdata;
	user = mosquitto_client_username(ed->client);
	if(!user) user = mosquitto_client_id(ed->client);
	if(!user) return MOSQ_ERR_SUCCESS;
	now = now_seconds();
	if(is_exempt(user)){
		if(ed->topic && !strncmp(ed->topic, INBOX_PREFIX, sizeof(INBOX_PREFIX) - 1)){
			b = find(ed->topic + sizeof(INBOX_PREFIX) - 1, now, false);
			if(b){
				b->tokens += inbox_credit;
				if(b->tokens > burst) b->tokens = burst;
			}
		}
		return MOSQ_ERR_SUCCESS;
	}
	if(now - pruned >= prune_seconds) prune(now); /* before find: it frees full buckets */
	b = find(user, now, true);
	if(!b) return MOSQ_ERR_SUCCESS; /* out of memory: let it through rather than refuse all */
	b->tokens += (now - b->then) * rate;
	if(b->tokens > burst) b->tokens = burst;
	b->then = now;
	cost = 1.0 + (double)(ed->payloadlen / 1024u);
	if(b->tokens >= cost){
		b->tokens -= cost;
		return MOSQ_ERR_SUCCESS;
	}
	dropped++;
	unlogged++;
	if(now - logged >= LOG_SECONDS){
		mosquitto_log_printf(MOSQ_LOG_WARNING,
				"ramino_limits: dropped %lu publishes of clients over their rate (lately %s; %lu in all)",
				unlogged, user, dropped);
		unlogged = 0;
		logged = now;
	}
	return MOSQ_ERR_ACL_DENIED;
}

static void add_exempt(const char *list)
{
	const char *p = list;

	while(*p && exempt_count < MAX_EXEMPT){
		size_t n;
		while(*p == ' ' || *p == ',') p++;
		n = strcspn(p, " ,");
		if(n == 0) break;
		exempt[exempt_count] = malloc(n + 1);
		if(!exempt[exempt_count]) return;
		memcpy(exempt[exempt_count], p, n);
		exempt[exempt_count][n] = '\0';
		exempt_count++;
		p += n;
	}
}

static int positive(const char *key, const char *value, double *out)
{
	char *end;
	double parsed = strtod(value, &end);

	if(end == value || *end != '\0' || !(parsed >= 0.0)){
		mosquitto_log_printf(MOSQ_LOG_ERR, "ramino_limits: plugin_opt_%s must be a number >= 0, not '%s'",
				key, value);
		return MOSQ_ERR_INVAL;
	}
	*out = parsed;
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5) return 5;
	}
	return -1;
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
		struct mosquitto_opt *options, int option_count)
{
	int rc = MOSQ_ERR_SUCCESS;

	(void)userdata;
	for(int i = 0; i < option_count && rc == MOSQ_ERR_SUCCESS; i++){
		const char *key = options[i].key, *value = options[i].value;
		if(!strcmp(key, "rate")) rc = positive(key, value, &rate);
		else if(!strcmp(key, "burst")) rc = positive(key, value, &burst);
		else if(!strcmp(key, "inbox_credit")) rc = positive(key, value, &inbox_credit);
		else if(!strcmp(key, "prune_seconds")) rc = positive(key, value, &prune_seconds);
		else if(!strcmp(key, "exempt")) add_exempt(value);
		else{
			mosquitto_log_printf(MOSQ_LOG_ERR, "ramino_limits: unknown option plugin_opt_%s", key);
			rc = MOSQ_ERR_INVAL;
		}
	}
	if(rc != MOSQ_ERR_SUCCESS) return rc;
	plugin_id = identifier;
	pruned = now_seconds();
	mosquitto_log_printf(MOSQ_LOG_INFO,
			"ramino_limits: %.0f publishes a second per user, burst %.0f, inbox credit %g, %d exempt",
			rate, burst, inbox_credit, exempt_count);
	return mosquitto_callback_register(plugin_id, MOSQ_EVT_MESSAGE, on_message, NULL, NULL);
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	(void)userdata;
	(void)options;
	(void)option_count;
	for(uint32_t slot = 0; slot < TABLE_SIZE; slot++){
		while(table[slot]){
			struct bucket *b = table[slot];
			table[slot] = b->next;
			free(b);
		}
	}
	for(int i = 0; i < exempt_count; i++) free(exempt[i]);
	exempt_count = 0;
	return mosquitto_callback_unregister(plugin_id, MOSQ_EVT_MESSAGE, on_message, NULL);
}
