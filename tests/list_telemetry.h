/* Tests of telemetry (comms.csv, timing logs, categories, collie-report's
 * telemetry commands); see test-list.h for the entry format. */
#define TEST_LIST_TELEMETRY(XX)
