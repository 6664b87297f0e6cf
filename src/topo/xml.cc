#include "topo/xml.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace loom {
namespace topo {

namespace {

struct Tag {
    std::string name;
    std::map<std::string, std::string> attrs;
    bool closing = false;     // </name>
    bool selfClosing = false; // <name .../>
    int line = 0;
};

// Splits the document into tags; text between tags is ignored.
bool tokenize(const std::string &s, std::vector<Tag> *tags, std::string *error) {
    size_t i = 0;
    int line = 1;
    auto fail = [&](const char *what) {
        *error = "line " + std::to_string(line) + ": " + what;
        return false;
    };
    while (i < s.size()) {
        if (s[i] == '\n') ++line;
        if (s[i] != '<') { ++i; continue; }
        if (s.compare(i, 4, "<!--") == 0) {
            size_t e = s.find("-->", i);
            if (e == std::string::npos) return fail("unterminated comment");
            for (size_t k = i; k < e; ++k) line += s[k] == '\n';
            i = e + 3;
            continue;
        }
        if (s.compare(i, 2, "<?") == 0) {
            size_t e = s.find("?>", i);
            if (e == std::string::npos) return fail("unterminated declaration");
            i = e + 2;
            continue;
        }
        Tag t;
        t.line = line;
        ++i;
        if (i < s.size() && s[i] == '/') { t.closing = true; ++i; }
        while (i < s.size() && (isalnum((unsigned char)s[i]) || s[i] == '_')) t.name += s[i++];
        if (t.name.empty()) return fail("tag without a name");
        for (;;) {
            while (i < s.size() && isspace((unsigned char)s[i])) line += s[i++] == '\n';
            if (i >= s.size()) return fail("unterminated tag");
            if (s[i] == '>') { ++i; break; }
            if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '>') { t.selfClosing = true; i += 2; break; }
            std::string key;
            while (i < s.size() && (isalnum((unsigned char)s[i]) || s[i] == '_')) key += s[i++];
            if (key.empty() || i + 1 >= s.size() || s[i] != '=' || (s[i + 1] != '"' && s[i + 1] != '\''))
                return fail("malformed attribute");
            char q = s[i + 1];
            size_t e = s.find(q, i + 2);
            if (e == std::string::npos) return fail("unterminated attribute value");
            t.attrs[key] = s.substr(i + 2, e - i - 2);
            i = e + 1;
        }
        tags->push_back(t);
    }
    return true;
}

std::string attr(const Tag &t, const char *k, const char *def = "") {
    auto it = t.attrs.find(k);
    return it == t.attrs.end() ? def : it->second;
}
int attrInt(const Tag &t, const char *k, int def) {
    std::string v = attr(t, k);
    return v.empty() ? def : atoi(v.c_str());
}
double attrDouble(const Tag &t, const char *k, double def) {
    std::string v = attr(t, k);
    return v.empty() ? def : atof(v.c_str());
}

struct PendingLink {
    Tag tag;
    int host;
};

bool addLink(System *sys, const PendingLink &p, std::string *error) {
    const Tag &t = p.tag;
    int a = sys->find(p.host, attr(t, "a")), b = sys->find(p.host, attr(t, "b"));
    if (a < 0 || b < 0) {
        *error = "line " + std::to_string(t.line) + ": link names an unknown node";
        return false;
    }
    std::string type = attr(t, "type");
    double bw = attrDouble(t, "bw", 0);
    int count = attrInt(t, "count", 1);
    LinkType lt;
    if (type == "nvlink") {
        lt = LinkType::NvLink;
        if (bw <= 0) {
            int sm = sys->nodes[a].type == NodeType::Gpu ? sys->nodes[a].sm : sys->nodes[b].sm;
            bw = count * nvlinkBandwidth(sm);
        }
    } else if (type == "pci") {
        lt = LinkType::Pci;
        if (bw <= 0) bw = pciBandwidth(attrInt(t, "gen", 0), attrInt(t, "width", 16));
    } else if (type == "sys") {
        lt = LinkType::Sys;
        if (bw <= 0) bw = 40.0; // typical x86 socket-to-socket
    } else {
        *error = "line " + std::to_string(t.line) + ": unknown link type '" + type + "'";
        return false;
    }
    sys->addLink(a, b, lt, bw, count);
    return true;
}

} // namespace

bool parseSystemXml(const std::string &xml, System *sys, std::string *error) {
    std::vector<Tag> tags;
    if (!tokenize(xml, &tags, error)) return false;
    int host = -1;
    bool inSystem = false;
    std::vector<PendingLink> links; // after all nodes of the host are known
    for (const Tag &t : tags) {
        auto bad = [&](const std::string &what) {
            *error = "line " + std::to_string(t.line) + ": " + what;
            return false;
        };
        if (t.name == "system") {
            if (t.closing) inSystem = false;
            else inSystem = true;
            continue;
        }
        if (!inSystem) return bad("<" + t.name + "> outside <system>");
        if (t.name == "host") {
            if (t.closing) { host = -1; continue; }
            host = sys->addHost(attr(t, "name", "host"));
            sys->hosts[host].p2p = attrInt(t, "p2p", 1) != 0;
            continue;
        }
        if (host < 0) return bad("<" + t.name + "> outside <host>");
        if (t.closing) continue;
        if (t.name == "link") { links.push_back(PendingLink{t, host}); continue; }
        Node n;
        n.host = host;
        n.id = attr(t, "id");
        n.busId = attr(t, "busid");
        if (n.id.empty()) return bad("<" + t.name + "> without id");
        if (sys->find(host, n.id) >= 0) return bad("duplicate id '" + n.id + "'");
        if (t.name == "cpu") {
            n.type = NodeType::Cpu;
            n.numa = attrInt(t, "numa", -1);
        } else if (t.name == "pci") {
            n.type = NodeType::Pci;
        } else if (t.name == "gpu") {
            n.type = NodeType::Gpu;
            n.cudaDev = attrInt(t, "dev", -1);
            n.sm = attrInt(t, "sm", 0);
        } else if (t.name == "nic") {
            n.type = NodeType::Nic;
            n.netGBs = attrDouble(t, "gbps", 0) / 8.0;
            n.linkLayer = attr(t, "linklayer", "ib");
            n.port = attrInt(t, "port", 1);
        } else if (t.name == "nvswitch") {
            n.type = NodeType::NvSwitch;
        } else {
            return bad("unknown element <" + t.name + ">");
        }
        sys->addNode(n);
    }
    for (const PendingLink &p : links)
        if (!addLink(sys, p, error)) return false;
    return true;
}

std::string systemToXml(const System &sys) {
    std::ostringstream o;
    o << "<system version=\"1\">\n";
    for (size_t h = 0; h < sys.hosts.size(); ++h) {
        o << "  <host name=\"" << sys.hosts[h].name << "\" p2p=\"" << (sys.hosts[h].p2p ? 1 : 0) << "\">\n";
        for (const Node &n : sys.nodes) {
            if (n.host != (int)h) continue;
            o << "    <" << nodeTypeName(n.type) << " id=\"" << n.id << "\"";
            if (!n.busId.empty()) o << " busid=\"" << n.busId << "\"";
            if (n.type == NodeType::Cpu) o << " numa=\"" << n.numa << "\"";
            if (n.type == NodeType::Gpu) o << " dev=\"" << n.cudaDev << "\" sm=\"" << n.sm << "\"";
            if (n.type == NodeType::Nic)
                o << " gbps=\"" << n.netGBs * 8 << "\" linklayer=\"" << n.linkLayer << "\" port=\"" << n.port << "\"";
            o << "/>\n";
        }
        for (const Link &l : sys.links) {
            if (sys.nodes[l.a].host != (int)h) continue;
            o << "    <link a=\"" << sys.nodes[l.a].id << "\" b=\"" << sys.nodes[l.b].id << "\" type=\""
              << linkTypeName(l.type) << "\"";
            if (l.type == LinkType::NvLink) o << " count=\"" << l.count << "\"";
            char bw[32];
            snprintf(bw, sizeof(bw), "%.2f", l.bw);
            o << " bw=\"" << bw << "\"/>\n";
        }
        o << "  </host>\n";
    }
    o << "</system>\n";
    return o.str();
}

bool readFile(const std::string &path, std::string *out) {
    std::ifstream f(path);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return true;
}

bool writeFile(const std::string &path, const std::string &data) {
    std::ofstream f(path);
    f << data;
    return (bool)f;
}

} // namespace topo
} // namespace loom
