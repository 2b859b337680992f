/*
 * line-firmware: the reference firmware of the `line` protocol
 * =============================================================
 *
 * An Arduino Uno or Nano (ATmega328P) with a relay, a push button and a
 * TMP36 temperature sensor, speaking the line protocol (PROTOCOL.md in this
 * folder) on its USB serial port. It is the board that sim.go, in this
 * folder, plays on a pseudo-terminal: the same firmware name and version,
 * the same capabilities, the same replies and error codes.
 *
 *   relay        bool    actuator   SET and GET; off at boot
 *   button       bool    sensor     GET, and `EVT button true|false` when it
 *                                   changes (debounced)
 *   temperature  number  sensor  C  GET, one decimal
 *
 * Wiring
 * ------
 *   Relay   D7 (RELAY_PIN) to the IN of a relay module; the module's VCC to
 *           5V and GND to GND. The relay is energised when the pin is HIGH
 *           (RELAY_ACTIVE_HIGH 1); many cheap opto-isolated modules switch on
 *           a LOW input: set RELAY_ACTIVE_HIGH to 0 for those. A bare relay
 *           coil needs a transistor and a flyback diode, never the pin alone.
 *           The pin is set to "off" before it becomes an output, so the relay
 *           does not click at reset.
 *   Button  D2 (BUTTON_PIN) to one side of a push button, the other side to
 *           GND. The internal pull-up holds the pin HIGH; pressed reads LOW.
 *           Debounced in software: a level must hold DEBOUNCE_MS (30 ms).
 *   TMP36   Flat face towards you, legs down: left leg to 5V, middle leg
 *           (Vout) to A0 (TEMP_PIN), right leg to GND; a 100 nF capacitor
 *           from 5V to GND next to the sensor steadies the reading.
 *           deg C = (mV - 500) / 10, so tenths of a degree = mV - 500.
 *
 * ADC reference
 * -------------
 *   By default the ADC measures against AVcc, the board's 5 V rail
 *   (analogReference(DEFAULT)), taken as TEMP_AREF_MV = 5000 mV: one step is
 *   4.9 mV, about 0.5 degC, and the reading is only as right as the rail (on
 *   USB it is often 4.7 to 5.1 V: measure it and set TEMP_AREF_MV). With
 *   TEMP_USE_INTERNAL_1V1 set to 1 it measures against the chip's internal
 *   1.1 V reference instead: one step is about 0.11 degC and the supply does
 *   not matter, but the range ends at 1.1 V (60 degC) and the reference is
 *   1.0 to 1.2 V from chip to chip (measure it on the AREF pin and set
 *   TEMP_AREF_MV); nothing may then drive the AREF pin. The reading is the
 *   mean of the last 16 samples, one taken every 20 ms.
 *
 * Protocol
 * --------
 *   PROTOCOL.md: one request per line, `<id> PING`, `<id> INFO`,
 *   `<id> GET <name>`, `<id> SET <name> <value>`; every line, both ways, is
 *   `<body> *CC` and LF, CC the CRC-8/SMBUS of the body in upper-case hex
 *   (a CR before the LF is ignored). 115200 baud, 8N1. A line with a bad
 *   CRC, a byte that is not printable ASCII, more than 256 bytes with its
 *   end, or no id (1 to 65535 in plain digits) is dropped without a reply,
 *   as noise. The board says `EVT boot 1.0.0` when it starts.
 *
 * Flashing
 * --------
 *   Arduino IDE: open this file (the folder is the sketch), choose the board
 *   (Arduino Uno, or Arduino Nano with its processor, "ATmega328P" or
 *   "ATmega328P (Old Bootloader)") and the port, and Upload.
 *   arduino-cli, from the folder that holds this one:
 *     arduino-cli core install arduino:avr
 *     arduino-cli compile --fqbn arduino:avr:uno line-firmware
 *     arduino-cli upload --fqbn arduino:avr:uno -p <port> line-firmware
 *   (<port> as /dev/ttyACM0 or COM3; for a Nano the fqbn is
 *   arduino:avr:nano:cpu=atmega328 or arduino:avr:nano:cpu=atmega328old).
 *
 * Trying it by hand
 * -----------------
 *   Open a terminal on the port at 115200 baud that ends each line with LF
 *   (the IDE's Serial Monitor set to "Newline" or "Both NL & CR"). Opening
 *   the port resets an Uno or Nano; after a second it says
 *       EVT boot 1.0.0 *00
 *   Type these lines (the CRC covers what comes before " *"):
 *       1 PING *F7              answers  OK 1 *1A
 *       2 INFO *CB              answers  OK 2 line-firmware 1.0.0
 *                                        relay:bool:actuator button:bool:sensor
 *                                        temperature:number:sensor:C *C8
 *                                        (on one line)
 *       3 SET relay true *7E    answers  OK 3 *14   and the relay closes
 *   A line with a wrong CRC gets no answer at all. Pressing the button says
 *       EVT button true *69     and on release   EVT button false *3E
 *
 * Resources: no String, no heap. The request buffer is 256 bytes and the
 * reply buffer 300; the reply is queued and handed to the UART only as fast
 * as it takes bytes, so loop() never waits on the serial line, the ADC
 * (one 0.1 ms conversion per 20 ms) or the button.
 *
 * The protocol part (CRC, line checks, parsing, replies, debounce, the
 * TMP36 arithmetic) makes no Arduino call; defining LINE_FIRMWARE_HOST_TEST
 * leaves out the hardware part, so that a test on a computer can include
 * this file with its own stand-ins for the three hw_ functions and the
 * pgmspace names (PROGMEM, PSTR, F, pgm_read_byte, strcmp_P).
 */

#include <stdint.h>
#include <string.h>

// ---- configuration ---------------------------------------------------------

#define FIRMWARE_NAME "line-firmware"
#define FIRMWARE_VERSION "1.0.0"

#define SERIAL_BAUD 115200

#ifndef RELAY_PIN
#define RELAY_PIN 7
#endif
#ifndef RELAY_ACTIVE_HIGH
#define RELAY_ACTIVE_HIGH 1 // 0 for a module that switches on a LOW input
#endif
#if RELAY_ACTIVE_HIGH
#define RELAY_ON_LEVEL HIGH
#define RELAY_OFF_LEVEL LOW
#else
#define RELAY_ON_LEVEL LOW
#define RELAY_OFF_LEVEL HIGH
#endif

#ifndef BUTTON_PIN
#define BUTTON_PIN 2 // to GND through the button; INPUT_PULLUP
#endif
#define DEBOUNCE_MS 30

#ifndef TEMP_PIN
#define TEMP_PIN A0 // TMP36 Vout
#endif
#ifndef TEMP_USE_INTERNAL_1V1
#define TEMP_USE_INTERNAL_1V1 0 // 1: the internal 1.1 V reference
#endif
#ifndef TEMP_AREF_MV
#if TEMP_USE_INTERNAL_1V1
#define TEMP_AREF_MV 1100UL // measure it on the AREF pin
#else
#define TEMP_AREF_MV 5000UL // measure the 5V pin
#endif
#endif
#define TEMP_SAMPLES 16     // readings averaged
#define TEMP_SAMPLE_MS 20   // one reading every so often

// ---- sizes -----------------------------------------------------------------

// A request line with its end is at most 256 bytes, and its body at most 250
// (250, " *CC", CR, LF). The buffer holds what comes before the LF.
#define REQUEST_LINE_MAX 256
#define BODY_MAX 250
// A reply's body is held to 250 bytes too (see reply_char), so a reply line
// is at most 255 bytes with its LF.
#define REPLY_LINE_MAX (BODY_MAX + 5)
#define EVT_LINE_MAX 24 // "EVT button false *CC" LF is 21
#define TX_SIZE 300     // a reply and an event or two

// ---- what the protocol part asks of the hardware ---------------------------

bool hw_relay_is_on();          // the pin, read back
void hw_relay_set(bool on);     // drive the pin
int16_t hw_temperature_tenths(); // tenths of a degree C

// ---- CRC-8/SMBUS -----------------------------------------------------------

// Polynomial 0x07, initial value 0, no reflection, no final XOR, bit by bit
// (a table would cost 256 bytes). The check value of "123456789" is 0xF4.
uint8_t crc8_update(uint8_t crc, uint8_t b) {
  crc ^= b;
  for (uint8_t i = 0; i < 8; i++) {
    if (crc & 0x80) {
      crc = (uint8_t)((crc << 1) ^ 0x07);
    } else {
      crc = (uint8_t)(crc << 1);
    }
  }
  return crc;
}

uint8_t crc8(const char *s, uint16_t n) {
  uint8_t crc = 0;
  for (uint16_t i = 0; i < n; i++) {
    crc = crc8_update(crc, (uint8_t)s[i]);
  }
  return crc;
}

// ---- the reply queue -------------------------------------------------------

// Lines to send, tx_buf[tx_head..tx_len). A line is written whole into the
// queue, its CRC computed as it goes, and the UART takes it from there.
static char tx_buf[TX_SIZE];
static uint16_t tx_head = 0;
static uint16_t tx_len = 0;
static uint16_t reply_start = 0;
static uint8_t reply_crc = 0;
static bool reply_overflow = false;

// tx_room is how many bytes a new line may take; it moves what is still to
// send to the front of the queue.
uint16_t tx_room() {
  if (tx_head > 0) {
    memmove(tx_buf, tx_buf + tx_head, tx_len - tx_head);
    tx_len -= tx_head;
    tx_head = 0;
  }
  return TX_SIZE - tx_len;
}

void reply_begin() {
  reply_start = tx_len;
  reply_crc = 0;
  reply_overflow = false;
}

// reply_char appends one byte of the body. A body stops at 250 bytes: only
// an unknown name echoed in an error can make it longer (a name is 32 bytes
// at most, but a request may carry any word), and the rest of it is cut, so
// that no reply is a line over the protocol's limit.
void reply_char(char c) {
  if (tx_len - reply_start >= BODY_MAX) {
    return;
  }
  if (tx_len + 5 >= TX_SIZE) { // keep room for " *CC" LF
    reply_overflow = true;
    return;
  }
  tx_buf[tx_len++] = c;
  reply_crc = crc8_update(reply_crc, (uint8_t)c);
}

void reply_str(const char *s) {
  while (*s) {
    reply_char(*s++);
  }
}

// reply_F appends a constant string kept in flash: reply_F(F("OK ")).
void reply_F(const __FlashStringHelper *fs) {
  const char *p = reinterpret_cast<const char *>(fs);
  char c;
  while ((c = (char)pgm_read_byte(p++)) != 0) {
    reply_char(c);
  }
}

void reply_uint(uint16_t v) {
  char digits[5];
  uint8_t n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (n > 0) {
    reply_char(digits[--n]);
  }
}

void reply_bool(bool v) {
  if (v) {
    reply_F(F("true"));
  } else {
    reply_F(F("false"));
  }
}

// reply_tenths writes a number of tenths with one decimal, or none when it
// is whole, as the simulator does: 215 is 21.5, 220 is 22, -32 is -3.2.
void reply_tenths(int16_t t) {
  uint16_t u;
  if (t < 0) {
    reply_char('-');
    u = (uint16_t)(-(int32_t)t);
  } else {
    u = (uint16_t)t;
  }
  reply_uint(u / 10);
  if (u % 10 != 0) {
    reply_char('.');
    reply_char((char)('0' + u % 10));
  }
}

const char hex_digits[] = "0123456789ABCDEF";

// reply_end closes the line with its CRC; a line that did not fit (it
// cannot, the room was asked first) is taken back whole.
void reply_end() {
  if (reply_overflow) {
    tx_len = reply_start;
    return;
  }
  tx_buf[tx_len++] = ' ';
  tx_buf[tx_len++] = '*';
  tx_buf[tx_len++] = hex_digits[reply_crc >> 4];
  tx_buf[tx_len++] = hex_digits[reply_crc & 0x0F];
  tx_buf[tx_len++] = '\n';
}

// ---- requests --------------------------------------------------------------

// valid_id: 1 to 65535 in plain digits, no sign and no leading zero, as the
// host writes it; anything else cannot be answered and is dropped.
bool valid_id(const char *s) {
  if (s[0] == '0') {
    return false;
  }
  uint32_t v = 0;
  uint8_t n = 0;
  for (; s[n] != 0; n++) {
    if (n == 5 || s[n] < '0' || s[n] > '9') {
      return false;
    }
    v = v * 10 + (uint32_t)(s[n] - '0');
  }
  return n > 0 && v <= 65535UL;
}

static bool btn_pressed = false; // the debounced state, what GET answers

void reply_ok(const char *id) {
  reply_F(F("OK "));
  reply_str(id);
}

void reply_err(const char *id, const __FlashStringHelper *code_and_text) {
  reply_F(F("ERR "));
  reply_str(id);
  reply_char(' ');
  reply_F(code_and_text);
}

// answer replies to the body of a request whose CRC held; body is
// NUL-terminated and is cut into tokens in place.
void answer(char *body) {
  // Tokens are separated by one space each, as in the simulator: two spaces
  // make an empty token, a token too many or an empty name or value. ntok
  // counts them up to 5, which stands for "more than 4".
  char *tok[4];
  uint8_t ntok = 1;
  tok[0] = body;
  for (char *p = body; *p != 0; p++) {
    if (*p == ' ') {
      *p = 0;
      if (ntok < 4) {
        tok[ntok] = p + 1;
      }
      if (ntok < 5) {
        ntok++;
      }
    }
  }
  const char *id = tok[0];
  if (!valid_id(id) || ntok < 2) {
    return; // no id to answer to
  }
  const char *verb = tok[1];

  reply_begin();
  if (ntok == 2 && strcmp_P(verb, PSTR("PING")) == 0) {
    reply_ok(id);
  } else if (ntok == 2 && strcmp_P(verb, PSTR("INFO")) == 0) {
    reply_ok(id);
    reply_F(F(" " FIRMWARE_NAME " " FIRMWARE_VERSION
              " relay:bool:actuator button:bool:sensor temperature:number:sensor:C"));
  } else if (ntok == 3 && strcmp_P(verb, PSTR("GET")) == 0) {
    const char *name = tok[2];
    if (strcmp_P(name, PSTR("relay")) == 0) {
      reply_ok(id);
      reply_char(' ');
      reply_bool(hw_relay_is_on());
    } else if (strcmp_P(name, PSTR("button")) == 0) {
      reply_ok(id);
      reply_char(' ');
      reply_bool(btn_pressed);
    } else if (strcmp_P(name, PSTR("temperature")) == 0) {
      reply_ok(id);
      reply_char(' ');
      reply_tenths(hw_temperature_tenths());
    } else {
      reply_err(id, F("E_UNKNOWN no capability "));
      reply_str(name);
    }
  } else if (ntok == 4 && strcmp_P(verb, PSTR("SET")) == 0) {
    const char *name = tok[2];
    const char *value = tok[3];
    if (strcmp_P(name, PSTR("relay")) == 0) {
      if (strcmp_P(value, PSTR("true")) == 0) {
        hw_relay_set(true);
        reply_ok(id); // the output is set before the reply
      } else if (strcmp_P(value, PSTR("false")) == 0) {
        hw_relay_set(false);
        reply_ok(id);
      } else {
        reply_err(id, F("E_VALUE relay takes true or false"));
      }
    } else if (strcmp_P(name, PSTR("button")) == 0) {
      reply_err(id, F("E_READONLY button is a sensor"));
    } else if (strcmp_P(name, PSTR("temperature")) == 0) {
      reply_err(id, F("E_READONLY temperature is a sensor"));
    } else {
      reply_err(id, F("E_UNKNOWN no capability "));
      reply_str(name);
    }
  } else {
    reply_err(id, F("E_SYNTAX cannot read the request"));
  }
  reply_end();
}

int8_t hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return (int8_t)(c - '0');
  }
  if (c >= 'A' && c <= 'F') {
    return (int8_t)(c - 'A' + 10);
  }
  return -1; // lower case too: the protocol writes upper case
}

// handle_line checks one line (without its LF) and answers it, or drops it
// as noise: a bad CRC, a byte outside printable ASCII, no " *CC" at the end,
// a body over 250 bytes.
void handle_line(char *s, uint16_t n) {
  if (n > 0 && s[n - 1] == '\r') {
    n--;
  }
  if (n < 5) {
    return;
  }
  for (uint16_t i = 0; i < n; i++) {
    if ((uint8_t)s[i] < 0x20 || (uint8_t)s[i] > 0x7E) {
      return;
    }
  }
  if (s[n - 4] != ' ' || s[n - 3] != '*') {
    return;
  }
  int8_t hi = hex_value(s[n - 2]);
  int8_t lo = hex_value(s[n - 1]);
  if (hi < 0 || lo < 0) {
    return;
  }
  uint16_t body_len = n - 4;
  if (body_len > BODY_MAX) {
    return;
  }
  if (crc8(s, body_len) != (uint8_t)((hi << 4) | lo)) {
    return;
  }
  s[body_len] = 0;
  answer(s);
}

// ---- the request line ------------------------------------------------------

static char rx_buf[REQUEST_LINE_MAX];
static uint16_t rx_len = 0;
static bool rx_long = false;  // over REQUEST_LINE_MAX: dropped up to its LF
static bool rx_ready = false; // rx_buf holds a whole line

// rx_byte takes one byte from the serial line; not to be called while
// rx_ready.
void rx_byte(uint8_t c) {
  if (c == '\n') {
    if (rx_long) {
      rx_long = false;
      rx_len = 0;
    } else {
      rx_ready = true;
    }
    return;
  }
  if (rx_long) {
    return;
  }
  if (rx_len >= REQUEST_LINE_MAX - 1) { // with its LF it would pass 256
    rx_long = true;
    return;
  }
  rx_buf[rx_len++] = (char)c;
}

// serve_request answers the line read, once its longest reply has room.
void serve_request() {
  if (!rx_ready || tx_room() < REPLY_LINE_MAX) {
    return;
  }
  handle_line(rx_buf, rx_len);
  rx_len = 0;
  rx_ready = false;
}

// ---- the button ------------------------------------------------------------

static bool btn_raw = false;      // the level last seen, pressed or not
static bool btn_reported = false; // the state the host was last told
static unsigned long btn_since = 0;

void button_start(bool pressed) {
  btn_raw = btn_pressed = btn_reported = pressed;
}

// button_sample takes the level now: a new level counts once it has held
// DEBOUNCE_MS. millis() wrapping is harmless with unsigned subtraction.
void button_sample(bool pressed, unsigned long now) {
  if (pressed != btn_raw) {
    btn_raw = pressed;
    btn_since = now;
  } else if (btn_raw != btn_pressed && (unsigned long)(now - btn_since) >= DEBOUNCE_MS) {
    btn_pressed = btn_raw;
  }
}

// button_event says `EVT button <state>` when the debounced state is not the
// one last said and the queue has room.
void button_event() {
  if (btn_pressed == btn_reported || tx_room() < EVT_LINE_MAX) {
    return;
  }
  reply_begin();
  reply_F(F("EVT button "));
  reply_bool(btn_pressed);
  reply_end();
  btn_reported = btn_pressed;
}

void boot_event() {
  reply_begin();
  reply_F(F("EVT boot " FIRMWARE_VERSION));
  reply_end();
}

// ---- the TMP36 -------------------------------------------------------------

// tmp36_tenths turns the sum of TEMP_SAMPLES 10-bit readings into tenths of
// a degree C: mV = reading * TEMP_AREF_MV / 1024, rounded, and the TMP36
// gives 500 mV at 0 degC and 10 mV per degree.
int16_t tmp36_tenths(uint16_t adc_sum) {
  const uint32_t steps = 1024UL * TEMP_SAMPLES;
  uint32_t mv = ((uint32_t)adc_sum * TEMP_AREF_MV + steps / 2) / steps;
  return (int16_t)((int32_t)mv - 500);
}

// ---- the hardware ----------------------------------------------------------

#ifndef LINE_FIRMWARE_HOST_TEST

static uint16_t temp_ring[TEMP_SAMPLES];
static uint16_t temp_sum = 0;
static uint8_t temp_next = 0;
static unsigned long temp_at = 0;

// The relay's state is read back from the pin: digitalRead of an output
// pin reads the level the pin drives (PINx), not a copy kept in RAM. It
// does not see the contacts: a welded or missing relay needs a feedback
// input of its own.
bool hw_relay_is_on() {
  return digitalRead(RELAY_PIN) == RELAY_ON_LEVEL;
}

void hw_relay_set(bool on) {
  digitalWrite(RELAY_PIN, on ? RELAY_ON_LEVEL : RELAY_OFF_LEVEL);
}

int16_t hw_temperature_tenths() {
  return tmp36_tenths(temp_sum);
}

void temp_sample(unsigned long now) {
  if ((unsigned long)(now - temp_at) < TEMP_SAMPLE_MS) {
    return;
  }
  temp_at = now;
  uint16_t r = (uint16_t)analogRead(TEMP_PIN);
  temp_sum = temp_sum - temp_ring[temp_next] + r;
  temp_ring[temp_next] = r;
  temp_next = (uint8_t)((temp_next + 1) % TEMP_SAMPLES);
}

// tx_pump hands the UART as many queued bytes as its buffer takes now, so
// that Serial.write never waits.
void tx_pump() {
  int room = Serial.availableForWrite();
  while (room > 0 && tx_head < tx_len) {
    Serial.write((uint8_t)tx_buf[tx_head++]);
    room--;
  }
  if (tx_head == tx_len) {
    tx_head = tx_len = 0;
  }
}

void setup() {
  // Off first, then an output: the relay does not pulse at reset.
  digitalWrite(RELAY_PIN, RELAY_OFF_LEVEL);
  pinMode(RELAY_PIN, OUTPUT);
  pinMode(BUTTON_PIN, INPUT_PULLUP);

#if TEMP_USE_INTERNAL_1V1
  analogReference(INTERNAL);
#else
  analogReference(DEFAULT);
#endif
  // The first conversions after a change of reference are off; then fill
  // the mean. This and the rest of setup take about 3 ms.
  for (uint8_t i = 0; i < 4; i++) {
    (void)analogRead(TEMP_PIN);
  }
  for (uint8_t i = 0; i < TEMP_SAMPLES; i++) {
    temp_ring[i] = (uint16_t)analogRead(TEMP_PIN);
    temp_sum += temp_ring[i];
  }
  temp_at = millis();

  // The pull-up has long settled; the button's state at boot is not an
  // event.
  button_start(digitalRead(BUTTON_PIN) == LOW);
  btn_since = millis();

  Serial.begin(SERIAL_BAUD);
  boot_event();
  tx_pump();
}

void loop() {
  unsigned long now = millis();
  tx_pump();

  button_sample(digitalRead(BUTTON_PIN) == LOW, now);
  button_event();
  temp_sample(now);

  // Read what has come, up to the end of one line; the rest waits in the
  // UART's buffer until that line is answered.
  while (!rx_ready && Serial.available() > 0) {
    rx_byte((uint8_t)Serial.read());
  }
  serve_request();

  tx_pump();
}

#endif // LINE_FIRMWARE_HOST_TEST
